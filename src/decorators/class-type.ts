/** Constructor of any class (agents, state classes, pipelines). */
export type Class<T = object> = new (...args: any[]) => T;
