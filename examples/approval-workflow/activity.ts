import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { inject, injectable, type ServiceIdentifier } from 'inversify';

/** One thing a step did, as the demo's transcript shows it. */
export interface ActivityRecord {
  pid: number;
  step: string;
  event: 'start' | 'progress' | 'aborted' | 'waiting' | 'done';
  detail: string;
  at: number;
}

/** Where activity goes: a JSON-lines file shared by every process of the demo (or nowhere). */
export interface ActivityConfig {
  path?: string;
}

export const ACTIVITY_CONFIG: ServiceIdentifier<ActivityConfig> = Symbol.for('approval-workflow:ActivityConfig');

/**
 * What the agents report about their work, so the demo can show which process ran which step and what
 * was interrupted. Appends synchronously: a line is on disk before the step goes on.
 *
 * @example
 * this.activity.record('Review/assessRisk', 'progress', 'clause 3/8');
 */
@injectable()
export class Activity {
  constructor(@inject(ACTIVITY_CONFIG) private readonly config: ActivityConfig) {}

  record(step: string, event: ActivityRecord['event'], detail = ''): void {
    if (!this.config.path) return;
    const record: ActivityRecord = { pid: process.pid, step, event, detail, at: Date.now() };
    appendFileSync(this.config.path, JSON.stringify(record) + '\n');
  }
}

/**
 * Reads an activity file; a missing file is empty.
 *
 * @example
 * const aborted = readActivity(path).filter((r) => r.event === 'aborted');
 */
export function readActivity(path: string): ActivityRecord[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((line) => line.endsWith('}'))
    .map((line) => JSON.parse(line) as ActivityRecord);
}
