import { hash, randomUUID } from 'node:crypto';
import { isString } from 'class-validator';
import { serialize } from '../src/index';
import { RealisticState, REALISTIC_WIDTH } from './realistic-pipeline';

/**
 * The work a realistic step cannot skip, with no runtime around it: serialize its output (one declared
 * property and 1 KB more state) and its agent's memory, validate the one declared property it sets with
 * class-validator, SHA-256 the row's bytes, one UUID. This is what the memory store's per-step figure
 * is compared with: the part of a step's CPU that is not the executor's bookkeeping (promises, the
 * step context, the row object, telemetry, the store's copy, garbage collection of all of these).
 *
 * Built from the public entry and the libraries alone: the package's `serialize`; validation as the
 * runtime's fast path does it for a property that passes (an instance of the state class holding the
 * update, the property's one rule, `@IsString`, run on it: `@IsOptional` lets a set value through);
 * the one-shot `hash('sha256', ...)` the runtime hashes rows with.
 * The runtime's own `validateUpdate` (its per-class property plan, nested revival) costs a few µs more per
 * step than the bare rule check here; that difference now counts as the runtime's, so this floor reads lower
 * than it did when it called the runtime's functions (issue 36: 12-14 µs then, 9-10 µs now, same machine).
 *
 * @example
 * const usPerStep = stepWorkFloor(2000); // node CPU per step, µs
 */
export function stepWorkFloor(steps: number): number {
  const payload = 'x'.repeat(1000);
  const start = process.cpuUsage();
  let sink = 0;
  for (let i = 0; i < steps; i++) {
    const declared = `f${i % REALISTIC_WIDTH}`;
    const output = { [declared]: `step ${i} of agent ${i % 20}`, [`r${i}`]: payload };
    const text = serialize(output);
    const memory = serialize({ done: i, last: `s${i}` });
    const instance = new RealisticState() as Record<string, unknown>;
    for (const key of Object.keys(output)) instance[key] = output[key];
    if (!isString(instance[declared])) throw new Error(`${declared} is not a string`);
    sink += hash('sha256', `${text.length}:${text}${memory.length}:${memory}${randomUUID()}`, 'hex').length;
  }
  const used = process.cpuUsage(start);
  if (sink === 0) throw new Error('unreachable');
  return (used.user + used.system) / steps;
}
