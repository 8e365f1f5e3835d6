import type { Telemetry } from '../../contract/telemetry';

/** The default: observes nothing. */
export class NoopTelemetry implements Telemetry {
  runStarted(_event: Parameters<Telemetry['runStarted']>[0]): void {}
  stepCompleted(_event: Parameters<Telemetry['stepCompleted']>[0]): void {}
  stepFailed(_event: Parameters<Telemetry['stepFailed']>[0]): void {}
  sideEffect(_event: Parameters<Telemetry['sideEffect']>[0]): void {}
  runEnded(_event: Parameters<Telemetry['runEnded']>[0]): void {}
  leaseLost(_event: Parameters<Telemetry['leaseLost']>[0]): void {}
  span<T>(_name: string, _attributes: Record<string, string | number | boolean>, fn: () => Promise<T>): Promise<T> {
    return fn();
  }
}
