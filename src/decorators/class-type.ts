/**
 * Constructor of any class (agents, state classes, pipelines). The container, not our code, supplies the
 * arguments.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- inversify and class-transformer take `new (...args: any[])`: neither never[] nor unknown[] fits both them and a class whose constructor takes typed services
export type Class<T = object> = new (...args: any[]) => T;

/** Any class, abstract ones included: the `constructor` of a decorator's target, a prototype chain link. */
export type AnyClass = abstract new (...args: never[]) => unknown;

/**
 * The state a selector or a step's `when` sees in a pipeline that does not name its state type: `any`, so that
 * an untyped pipeline can write `(s) => s.risk ?? 'low'` as docs/control-flow.md does. A typed one names it
 * (`loop<MyState>(...)`, `branch<MyState>(...)`) and its selectors are checked.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the one deliberate `any` of the public API, documented above
export type UntypedState = any;
