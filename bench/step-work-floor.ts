import { randomUUID } from 'node:crypto';
import { serialize, serializeCopy, sha256 } from '../src/core/serializer';
import { validateUpdate } from '../src/core/state-schema';
import { RealisticState, REALISTIC_WIDTH } from './realistic-pipeline';

/**
 * The work a realistic step cannot skip, with no runtime around it: serialize its output (one declared
 * property and 1 KB more state) and its agent's memory, validate the one declared property it sets with
 * class-validator, SHA-256 the row's bytes, one UUID. This is what the memory store's per-step figure
 * is compared with: the part of a step's CPU that is not the executor's bookkeeping (promises, the
 * step context, the row object, telemetry, the store's copy, garbage collection of all of these).
 *
 * @example
 * const usPerStep = stepWorkFloor(2000); // node CPU per step, µs
 */
export function stepWorkFloor(steps: number): number {
  const payload = 'x'.repeat(1000);
  const start = process.cpuUsage();
  let sink = 0;
  for (let i = 0; i < steps; i++) {
    const output = { [`f${i % REALISTIC_WIDTH}`]: `step ${i} of agent ${i % 20}`, [`r${i}`]: payload };
    const { text, copy } = serializeCopy<Record<string, unknown>>(output);
    const memory = serialize({ done: i, last: `s${i}` });
    validateUpdate(RealisticState, copy, { runId: 'floor', phase: 'produced' });
    sink += sha256(`${text.length}:${text}${memory.length}:${memory}${randomUUID()}`).length;
  }
  const used = process.cpuUsage(start);
  if (sink === 0) throw new Error('unreachable');
  return (used.user + used.system) / steps;
}
