import { AsyncLocalStorage } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';
import {
  ROOT_CONTEXT,
  SpanStatusCode,
  TraceFlags,
  trace,
  type Context,
  type ContextManager,
  type Exception,
  type Span,
  type SpanAttributeValue,
  type SpanAttributes,
  type SpanContext,
  type SpanOptions,
  type SpanStatus,
  type TimeInput,
  type Tracer,
  type TracerProvider,
} from '@opentelemetry/api';

/** A finished or open span as the in-memory tracer recorded it. */
export interface RecordedSpan {
  name: string;
  spanId: string;
  traceId: string;
  parentSpanId: string | undefined;
  attributes: Record<string, SpanAttributeValue>;
  events: { name: string; attributes: SpanAttributes }[];
  status: SpanStatus;
  exceptions: unknown[];
  startTime: number;
  endTime: number | undefined;
}

/**
 * A TracerProvider written against the `@opentelemetry/api` interfaces only (no SDK is installed): it
 * records every span with its parent, attributes, events, status and end, so tests can assert the trace
 * tree a run produces.
 *
 * @example
 * const provider = new InMemoryTracerProvider();
 * const telemetry = new OpenTelemetryTelemetry({ tracerProvider: provider });
 * // ... run ...
 * provider.spans.filter((s) => s.name === 'waypoint.step')
 */
export class InMemoryTracerProvider implements TracerProvider {
  readonly spans: RecordedSpan[] = [];

  getTracer(): Tracer {
    return new InMemoryTracer(this.spans);
  }

  byName(name: string): RecordedSpan[] {
    return this.spans.filter((s) => s.name === name);
  }

  children(parent: RecordedSpan, name?: string): RecordedSpan[] {
    return this.spans.filter((s) => s.parentSpanId === parent.spanId && (name === undefined || s.name === name));
  }
}

class InMemoryTracer implements Tracer {
  constructor(private readonly spans: RecordedSpan[]) {}

  startSpan(name: string, options: SpanOptions = {}, ctx: Context = ROOT_CONTEXT): Span {
    const parent = trace.getSpan(ctx)?.spanContext();
    const record: RecordedSpan = {
      name,
      spanId: randomBytes(8).toString('hex'),
      traceId: parent?.traceId ?? randomBytes(16).toString('hex'),
      parentSpanId: parent?.spanId,
      attributes: { ...options.attributes },
      events: [],
      status: { code: SpanStatusCode.UNSET },
      exceptions: [],
      startTime: toMillis(options.startTime) ?? Date.now(),
      endTime: undefined,
    };
    this.spans.push(record);
    return new InMemorySpan(record);
  }

  startActiveSpan<F extends (span: Span) => unknown>(name: string, ...args: unknown[]): ReturnType<F> {
    const fn = args[args.length - 1] as F;
    const options = (args.length > 1 ? args[0] : {}) as SpanOptions;
    const ctx = (args.length > 2 ? args[1] : undefined) as Context | undefined;
    const span = this.startSpan(name, options, ctx);
    return fn(span) as ReturnType<F>;
  }
}

class InMemorySpan implements Span {
  constructor(readonly record: RecordedSpan) {}

  spanContext(): SpanContext {
    return { traceId: this.record.traceId, spanId: this.record.spanId, traceFlags: TraceFlags.SAMPLED };
  }
  setAttribute(key: string, value: SpanAttributeValue): this {
    this.assertOpen(`setAttribute(${key})`);
    this.record.attributes[key] = value;
    return this;
  }
  setAttributes(attributes: SpanAttributes): this {
    this.assertOpen('setAttributes');
    Object.assign(this.record.attributes, attributes);
    return this;
  }
  addEvent(name: string, attributes?: SpanAttributes | TimeInput): this {
    this.record.events.push({ name, attributes: typeof attributes === 'object' && !(attributes instanceof Date) && !Array.isArray(attributes) ? attributes : {} });
    return this;
  }
  addLink(): this {
    return this;
  }
  addLinks(): this {
    return this;
  }
  setStatus(status: SpanStatus): this {
    this.record.status = status;
    return this;
  }
  updateName(name: string): this {
    this.record.name = name;
    return this;
  }
  end(endTime?: TimeInput): void {
    // An SDK ignores a second end() with a warning; here it is a bug in the code under test.
    if (this.record.endTime !== undefined) throw new Error(`span ${this.record.name} ended twice`);
    this.record.endTime = toMillis(endTime) ?? Date.now();
  }
  isRecording(): boolean {
    return this.record.endTime === undefined;
  }
  recordException(exception: Exception): void {
    this.record.exceptions.push(exception);
  }

  private assertOpen(what: string): void {
    if (this.record.endTime !== undefined) throw new Error(`${what} on span ${this.record.name} after it ended`);
  }
}

/** A ContextManager on AsyncLocalStorage (what the SDK's async-hooks manager does), for propagation tests. */
export class AsyncLocalContextManager implements ContextManager {
  private readonly storage = new AsyncLocalStorage<Context>();

  active(): Context {
    return this.storage.getStore() ?? ROOT_CONTEXT;
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(ctx: Context, fn: F, thisArg?: ThisParameterType<F>, ...args: A): ReturnType<F> {
    return this.storage.run(ctx, () => fn.call(thisArg, ...args));
  }
  bind<T>(_ctx: Context, target: T): T {
    return target;
  }
  enable(): this {
    return this;
  }
  disable(): this {
    this.storage.disable();
    return this;
  }
}

function toMillis(time: TimeInput | undefined): number | undefined {
  if (time === undefined) return undefined;
  if (typeof time === 'number') return time;
  if (time instanceof Date) return time.getTime();
  return time[0] * 1000 + time[1] / 1e6;
}
