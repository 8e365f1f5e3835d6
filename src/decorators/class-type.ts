/** Constructor of any class (agents, state classes, pipelines). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Class<T = object> = new (...args: any[]) => T;
