import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { Container } from 'inversify';
import pino from 'pino';
import { TOKENS } from '../../src/index';
import { PinoLogger, pinoLogger, pinoLogging, withRunContext } from '../../src/integrations/pino';
import { pauseAndResume } from './observability-pipeline';

type Record = { [key: string]: unknown; msg: string; level: number };

/** A pino logger writing parsed records into an array. */
function capture(level: string): { logger: PinoLogger; records: Record[] } {
  const records: Record[] = [];
  return { logger: new PinoLogger(pino({ level }, { write: (line: string) => void records.push(JSON.parse(line) as Record) })), records };
}

const COORDINATES = ['runId', 'pipeline', 'agent', 'step', 'sequence', 'attempt'];

describe('pino logging adapter', () => {
  it('puts run id, pipeline, agent, step, sequence and attempt on every checkpoint record of a paused and resumed run', async () => {
    const { logger, records } = capture('debug');
    await pauseAndResume({ logger, failDraftOnce: true });
    const checkpoints = records.filter((r) => r.msg === 'checkpoint written');
    assert.deepEqual(
      checkpoints.map((r) => COORDINATES.map((k) => r[k])),
      [
        ['observed-1', 'observed', 'Researcher', 'Researcher/gather', 1, 1],
        ['observed-1', 'observed', 'Researcher', 'Researcher/pause', 2, 1],
        ['observed-1', 'observed', 'Writer', 'Writer/draft', 3, 2],
        ['observed-1', 'observed', 'Writer', 'Writer/send', 4, 1],
      ],
    );
    const resumed = records.find((r) => r.msg === 'resuming run')!;
    assert.deepEqual([resumed.runId, resumed.pipeline, resumed.skipped, resumed.sequence], ['observed-1', 'observed', 2, 2]);
    assert.deepEqual(
      records.filter((r) => r.msg === 'lease acquired').map((r) => [r.runId, r.epoch]),
      [
        ['observed-1', 1],
        ['observed-1', 2],
      ],
    );
    assert.ok(records.some((r) => r.msg === 'run paused' && r.runId === 'observed-1' && r.why === 'test pause'));
  });

  it('completes records logged inside a step or side effect from its context, and derives the agent from a step key', async () => {
    const { logger, records } = capture('debug');
    await pauseAndResume({ logger, failDraftOnce: true });
    const committed = records.find((r) => r.msg === 'side effect committed')!;
    assert.deepEqual([committed.runId, committed.agent, committed.step, committed.attempt, committed.operation], ['observed-1', 'Writer', 'Writer/send', 1, 'notify']);
    const failed = records.find((r) => r.msg === 'step attempt failed')!;
    assert.deepEqual([failed.runId, failed.agent, failed.step, failed.attempt, failed.retrying], ['observed-1', 'Writer', 'Writer/draft', 1, true]);
    assert.equal(failed.level, 40);
  });

  it('costs one level check for a disabled level, and never overrides fields the caller set', () => {
    const { logger, records } = capture('warn');
    logger.debug('invisible', { runId: 'r' });
    logger.info('invisible');
    logger.warn('visible', { runId: 'r', step: 'A/b' });
    assert.deepEqual(
      records.map((r) => [r.msg, r.agent]),
      [['visible', 'A']],
    );
    assert.deepEqual(withRunContext({ agent: 'given', step: 'X/y' }), { agent: 'given', step: 'X/y' });
    assert.deepEqual(withRunContext(undefined), {});
  });

  it('pinoLogging binds the logger; pinoLogger takes an instance or options', async () => {
    const instance = pino({ level: 'error' });
    assert.equal(pinoLogger(instance).pino, instance);
    assert.equal(pinoLogger({ level: 'debug' }).pino.level, 'debug');
    const container = new Container();
    await container.loadAsync(pinoLogging(instance));
    assert.equal((container.get(TOKENS.Logger) as PinoLogger).pino, instance);
  });

  it('every record the runtime emits about a run carries its pipeline, and every record about a step its sequence and attempt', async () => {
    const { logger, records } = capture('debug');
    await pauseAndResume({ logger, failDraftOnce: true });
    const missing = records.flatMap((r) => {
      const wanted = ['runId', 'pipeline', ...(r.step === undefined ? [] : ['agent', 'sequence', 'attempt'])];
      const absent = wanted.filter((k) => r[k] === undefined);
      return absent.length ? [`'${r.msg}' lacks ${absent.join(', ')}`] : [];
    });
    assert.deepEqual(missing, []);
  });
});
