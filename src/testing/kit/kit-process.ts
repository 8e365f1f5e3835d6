import { Container, type ContainerModule } from 'inversify';
import type { CheckpointStore } from '../../contract/checkpoint-store';
import type { Logger } from '../../contract/logger';
import { TOKENS } from '../../contract/tokens';
import { CRASH_HOOK, type CrashHook } from '../../core/step/crash-points';
import { Waypoint } from '../../composition/waypoint';
import { MemoryCheckpointStore } from '../../storage/memory-store';
import { mortalStore, type ProcessLife } from './mortal-store';
import type { TestClock } from './test-clock';

/** A logger that keeps quiet: a crash test runs a pipeline dozens of times. */
export const QUIET_LOGGER: Logger = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {}, isLevelEnabled: () => false };

/**
 * Opens the Waypoints of simulated processes on one store: the kit's memory store (shared by all of them,
 * on the test clock), or the store the user's modules bind (each process opens its own, as a restarted
 * process would). Each process sees the store through its own `ProcessLife`.
 */
export class KitProcesses {
  private shared: MemoryCheckpointStore | undefined;

  constructor(
    private readonly modules: readonly ContainerModule[],
    private readonly clock: TestClock,
  ) {}

  async open(life: ProcessLife, hook: CrashHook | undefined): Promise<Waypoint> {
    const container = new Container();
    await container.loadAsync(...this.modules);
    let inner: CheckpointStore;
    let owns = false;
    if (container.isBound(TOKENS.CheckpointStore)) {
      inner = container.get(TOKENS.CheckpointStore);
      container.unbind(TOKENS.CheckpointStore);
      owns = true;
    } else {
      inner = this.shared ??= new MemoryCheckpointStore(() => this.clock.now());
    }
    container.bind(TOKENS.CheckpointStore).toConstantValue(mortalStore(inner, life, owns));
    if (!container.isBound(TOKENS.Clock)) container.bind(TOKENS.Clock).toConstantValue(this.clock);
    if (!container.isBound(TOKENS.Logger)) container.bind(TOKENS.Logger).toConstantValue(QUIET_LOGGER);
    if (hook) container.bind(CRASH_HOOK).toConstantValue(hook);
    return Waypoint.create({ container });
  }
}
