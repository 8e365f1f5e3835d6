import { PipelineDefinitionError } from '../contract/errors';
import { interceptSideEffect } from '../contract/side-effect-hook';
import { validateRetries } from './validate-options';
import type { SideEffectOptions } from './options';
import type { AnyClass } from './class-type';

/**
 * Marks a method (on an agent or on any injectable service) as an external write that must happen once
 * per run however often the run is resumed. Inside a step, each call gets a deterministic operation key
 * (run, agent, step, operation name, call ordinal); a call whose operation is already committed returns
 * the recorded result without running. Outside a step the call fails with `SideEffectOutsideRunError`.
 *
 * The method is wrapped so that calls route through the idempotency guard of the step that is running;
 * nothing is registered and no I/O happens when the decorator is applied.
 *
 * @example
 * class Mailer {
 *   @SideEffect({ name: 'send-report' })
 *   async send(to: string, body: string) { await smtp.send({ to, body, idempotencyKey: currentOperation().key }); }
 * }
 */
export function SideEffect(options: SideEffectOptions = {}): MethodDecorator {
  return (target, key, descriptor: PropertyDescriptor) => {
    const owner = (target as { constructor: AnyClass }).constructor;
    const where = `@SideEffect on ${owner.name}.${String(key)}`;
    if (typeof key !== 'string') throw new PipelineDefinitionError(`${where}: side-effect methods need a string name.`);
    const original = descriptor.value as unknown;
    if (typeof original !== 'function') throw new PipelineDefinitionError(`${where}: only methods can be side effects.`);
    const name = options.name ?? key;
    if (typeof name !== 'string' || name.length === 0) throw new PipelineDefinitionError(`${where}: name must be a non-empty string.`);
    if (options.reconcile !== undefined && typeof options.reconcile !== 'function') {
      throw new PipelineDefinitionError(`${where}: reconcile must be a function.`);
    }
    validateRetries(where, options.retries);
    if (options.transactional !== undefined && typeof options.transactional !== 'boolean') {
      throw new PipelineDefinitionError(`${where}: transactional must be true or false.`);
    }
    if (options.transactional && options.reconcile) {
      throw new PipelineDefinitionError(`${where}: a transactional effect never has an unknown outcome, so it takes no reconcile hook.`);
    }
    const resolved: SideEffectOptions = { ...options, name };
    const fn = original as (...args: unknown[]) => unknown;
    const label = `${owner.name}.${key}`;
    descriptor.value = function guarded(this: unknown, ...args: unknown[]) {
      return interceptSideEffect(label, resolved, () => fn.apply(this, args), args);
    };
    return descriptor;
  };
}
