import { ContainerModule } from 'inversify';
import { NoopTelemetry } from '../core/ports/telemetry';
import { type ModelCallEvent, type Telemetry } from '../contract/telemetry';
import { TOKENS } from '../contract/tokens';

type Hook = 'runStarted' | 'stepCompleted' | 'stepFailed' | 'sideEffect' | 'runEnded' | 'leaseLost' | 'modelCall';

/**
 * One `Telemetry` that forwards every event to each of `parts`, in order; spans nest (the first part's
 * span is the outermost). The runtime calls telemetry on the checkpoint path, so a part that throws is
 * isolated: its error becomes one process warning per part and hook, and the run and the other parts
 * carry on. A span whose part fails around the step still returns the step's own outcome.
 *
 * @example
 * container.bind(TOKENS.Telemetry).toConstantValue(composeTelemetry(new PrometheusTelemetry(registry), new OpenTelemetryTelemetry()));
 */
export function composeTelemetry(...parts: Telemetry[]): Telemetry {
  const active = parts.filter((part) => !(part instanceof NoopTelemetry));
  if (active.length === 0) return new NoopTelemetry();
  if (active.length === 1) return active[0];
  return new ComposedTelemetry(active);
}

/**
 * A container module that binds `TOKENS.Telemetry` to `parts` (composed when there are several).
 *
 * @example
 * const waypoint = await Waypoint.create({ modules: [postgresStorage({ url }), telemetryModule(new PrometheusTelemetry(registry), new OpenTelemetryTelemetry())] });
 */
export function telemetryModule(...parts: Telemetry[]): ContainerModule {
  const telemetry = composeTelemetry(...parts);
  return new ContainerModule(({ bind }) => {
    bind(TOKENS.Telemetry).toConstantValue(telemetry);
  });
}

class ComposedTelemetry implements Telemetry {
  private readonly warned = new Set<string>();

  constructor(private readonly parts: readonly Telemetry[]) {}

  runStarted(event: Parameters<Telemetry['runStarted']>[0]): void {
    this.each('runStarted', (part) => part.runStarted(event));
  }
  stepCompleted(event: Parameters<Telemetry['stepCompleted']>[0]): void {
    this.each('stepCompleted', (part) => part.stepCompleted(event));
  }
  stepFailed(event: Parameters<Telemetry['stepFailed']>[0]): void {
    this.each('stepFailed', (part) => part.stepFailed(event));
  }
  sideEffect(event: Parameters<Telemetry['sideEffect']>[0]): void {
    this.each('sideEffect', (part) => part.sideEffect(event));
  }
  runEnded(event: Parameters<Telemetry['runEnded']>[0]): void {
    this.each('runEnded', (part) => part.runEnded(event));
  }
  leaseLost(event: Parameters<Telemetry['leaseLost']>[0]): void {
    this.each('leaseLost', (part) => part.leaseLost(event));
  }
  modelCall(event: ModelCallEvent): void {
    this.each('modelCall', (part) => part.modelCall?.(event));
  }

  span<T>(name: string, attributes: Record<string, string | number | boolean>, fn: () => Promise<T>): Promise<T> {
    const at = (index: number): Promise<T> => (index === this.parts.length ? fn() : this.isolatedSpan(index, name, attributes, () => at(index + 1)));
    return at(0);
  }

  /** Runs `inner` exactly once inside part `index`'s span; the part's own failure never changes the outcome. */
  private async isolatedSpan<T>(index: number, name: string, attributes: Record<string, string | number | boolean>, inner: () => Promise<T>): Promise<T> {
    let result: Promise<T> | undefined;
    const call = () => (result ??= inner());
    try {
      return await this.parts[index].span(name, attributes, call);
    } catch (error) {
      if (result === undefined) {
        this.warn(index, 'span', error);
        return call();
      }
      // `inner` ran: its outcome stands (a part rethrowing the step's own error is not a part failure).
      const own = await result.then(
        () => undefined,
        (innerError: unknown) => innerError,
      );
      if (own !== error) this.warn(index, 'span', error);
      return result;
    }
  }

  private each(hook: Hook, call: (part: Telemetry) => void): void {
    this.parts.forEach((part, index) => {
      try {
        call(part);
      } catch (error) {
        this.warn(index, hook, error);
      }
    });
  }

  private warn(index: number, hook: string, error: unknown): void {
    const key = `${index}:${hook}`;
    if (this.warned.has(key)) return;
    this.warned.add(key);
    const part = this.parts[index].constructor.name;
    process.emitWarning(
      `Telemetry ${part}.${hook} threw (${error instanceof Error ? error.message : String(error)}); the run continues without it. Further errors of this hook are not reported.`,
      {
        code: 'WAYPOINT_TELEMETRY',
      },
    );
  }
}
