import { PipelineDefinitionError } from '../contract/errors';
import { recordReducer } from './metadata';
import type { AnyClass } from './class-type';

/**
 * How updates of a state property merge: `reducer(current, update)` instead of replacing the value. It
 * applies to every step's update of the property, and at a `parallel` join to each branch's update in
 * declaration order. A growing list then costs only what each step adds: a step returns the new items.
 * The reducer must be pure and must not change its arguments (they are frozen).
 *
 * @example
 * class State {
 *   @IsOptional() @Reducer((a: string[] = [], b: string[] = []) => [...a, ...b]) findings?: string[];
 * }
 */
export function Reducer<T>(reducer: (current: T | undefined, update: T) => T): PropertyDecorator {
  return (target, key) => {
    const owner = (target as { constructor: AnyClass }).constructor;
    if (typeof key !== 'string') throw new PipelineDefinitionError(`@Reducer on ${owner.name}: the property needs a string name.`);
    if (typeof reducer !== 'function') throw new PipelineDefinitionError(`@Reducer on ${owner.name}.${key}: pass a function (current, update) => merged.`);
    recordReducer(owner, key, reducer);
  };
}
