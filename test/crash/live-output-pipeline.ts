import 'reflect-metadata';
import { Agent, Pipeline, Step, type StepContext } from '../../src/index';

/*
 * The pipeline of the live-output crash test: an intro that emits 5 parts, a writer that emits 200 (slowly,
 * so a test can kill its process in the middle; 70 at once with LIVE_FAST=1), and an outro that emits 3.
 */
export const WRITER_PARTS = 200;
/**
 * Parts of the writer with LIVE_FAST=1, emitted at once before it returns: a first batch of 64 leaves at
 * once, the last 6 wait for the writer's delay, so only the row's wait makes them precede the row.
 */
export const FAST_PARTS = 70;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

class Intro extends Agent {
  @Step() hello(ctx: StepContext) {
    for (let i = 0; i < 5; i++) ctx.emit({ intro: i });
    return { intro: true };
  }
}

class Writer extends Agent {
  @Step() async write(ctx: StepContext) {
    const fast = process.env.LIVE_FAST === '1';
    for (let i = 0; i < (fast ? FAST_PARTS : WRITER_PARTS); i++) {
      ctx.emit({ delta: i });
      if (!fast && i % 2 === 1) await sleep(10);
    }
    return { written: fast ? FAST_PARTS : WRITER_PARTS };
  }
}

class Outro extends Agent {
  @Step() bye(ctx: StepContext) {
    for (let i = 0; i < 3; i++) ctx.emit({ outro: i });
    return { outro: true };
  }
}

@Pipeline({ name: 'live-crash', version: '1', agents: [Intro, Writer, Outro] })
export class LiveCrashPipeline {}

/** The parts a completed run must show, by step, in order. */
export function expectedParts(): [string, unknown][] {
  return [
    ...Array.from({ length: 5 }, (_, i): [string, unknown] => ['Intro/hello', { intro: i }]),
    ...Array.from({ length: WRITER_PARTS }, (_, i): [string, unknown] => ['Writer/write', { delta: i }]),
    ...Array.from({ length: 3 }, (_, i): [string, unknown] => ['Outro/bye', { outro: i }]),
  ];
}
