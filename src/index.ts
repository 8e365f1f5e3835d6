import 'reflect-metadata';

export { Pipeline } from './decorators/pipeline';
export { Step } from './decorators/step';
export { SideEffect } from './decorators/side-effect';
export { Secret } from './decorators/secret';
export { Reducer } from './decorators/reducer';
export {
  parallel,
  loop,
  branch,
  forEach,
  isFlowConstruct,
  type AgentEntry,
  type FlowConstruct,
  type ParallelConstruct,
  type LoopConstruct,
  type LoopOptions,
  type BranchConstruct,
  type BranchOptions,
  type ForEachConstruct,
  type ForEachOptions,
  type StateSelector,
} from './decorators/flow';
export { ParallelConflictError, LoopLimitError, UnknownBranchError, SelectorError, ItemFailedError } from './core/flow/flow-errors';
export type { FlowNode } from './core/plan/flow-plan';
export type {
  PipelineOptions,
  StepOptions,
  SideEffectOptions,
  RetryPolicy,
  ReconcileOutcome,
  ReconcileContext,
  CheckpointMigration,
  MigratableCheckpoint,
} from './decorators/options';
export { Agent } from './contract/agent';
export type { StepContext } from './core/step/step-context';
export { Waypoint, type CreateOptions, type ListFilter, type RunFleet, type RunOptions, type RunResult, type RunInfo } from './composition/waypoint';
export {
  RunStreamReader,
  visibleParts,
  type RunStreamEvent,
  type RunStreamPart,
  type RunStreamRetract,
  type RunStreamStatus,
  type StreamOptions,
} from './composition/run-stream-reader';
export { dropStreams, type DropStreamsOptions, type DroppedStream } from './composition/stream-retention';
export { runProgress, type RunProgress, type ChildProgress } from './core/history/run-progress';
export { FLEET, type FleetPort, type FleetHost, type FleetWorkerHandle } from './core/run/fleet-port';
export type { PipelineCheckpoint, AgentStepResult } from './core/history/checkpoint-manager';
export { readPlan, type PipelinePlan, type StepPlan, type AgentPlan, type StateTarget } from './core/plan/plan-reader';
export { guardedExecute, operationKey, type GuardedOptions } from './core/step/idempotency-guard';
export { currentOperation, currentTransaction, NoActiveOperationError, type ActiveOperation } from './core/step/run-context';
export { TransactionsUnsupportedError, EffectAfterTransactionError, NoTransactionError, TransactionEndedError, TransactionAbortedError } from './core/step/transaction-scope';
export { serialize, type SerializeWhere } from './core/state/serializer';
export { deserialize, MAX_VALUE_DEPTH } from './core/state/value-decoder';
export { TOKENS } from './contract/tokens';
export { SystemClock } from './core/ports/clock';
export { type Clock } from './contract/clock';
export { JsonLogger, type Logger, type LogFields } from './contract/logger';
export type { WaypointOptions, LiveOutputOptions } from './contract/options';
export { NoopTelemetry } from './core/ports/telemetry';
export { type Telemetry, type StepEvent, type ModelCallEvent } from './contract/telemetry';
export type { ForkOptions } from './core/history/fork';
export { RetentionManager, GzipFileArchiveSink, type ArchiveSink, type RetentionOptions, type RestoreReport, type SealedRows } from './core/history/retention';
export { ObjectArchiveSink } from './core/history/archive-objects';
export {
  ArchiveUnavailableError,
  NotArchivedError,
  isReadableArchive,
  type ArchiveBatch,
  type ArchiveEntry,
  type ArchiveKind,
  type WriteOnlyArchiveSink,
} from './contract/archive-sink';
export { ShutdownHarness, exitCodeFor, type ShutdownOptions } from './core/lease/shutdown-harness';
export type { WaitOptions } from './core/step/durable-waits';
export type { ApprovalLinkOptions } from './core/step/approval-token';
export { checkSignalName, signalNameProblem, MAX_SIGNAL_NAME_LENGTH, DEFAULT_MAX_SIGNAL_PAYLOAD_BYTES } from './contract/signal-rules';
export { canTransition } from './core/run/run-status';
export { FAULT_POINTS, FLEET_FAULT_POINTS, RUNTIME_FAULT_POINTS, type FaultPoint } from './core/step/fault-points';
export * from './contract/errors';
export * from './contract/checkpoint-store';
export { MemoryCheckpointStore } from './storage/memory-store';
export {
  EncryptingCheckpointStore,
  type EncryptionOptions,
  type ReencryptAllOptions,
  type ReencryptAllReport,
  type ReencryptOptions,
  type ReencryptReport,
} from './storage/encrypting-store';
export { CodecCheckpointStore } from './storage/codec-store';
export type { CheckpointPayloadCodec, PayloadSlot } from './storage/payload-codec';
export * from './storage/modules';
export * from './queue/index';
export { durable, DurableRequestChangedError, type DurableCallOptions, type ErrorPolicy } from './integrations/durable-call';
export { startUiServer, type UiServer, type UiServerOptions } from './ui/index';
export { TypeOrmCheckpointStore } from './storage/sql/typeorm-store';
export type { StoreEntities } from './storage/sql/options';
export type { SqliteStoreOptions, PostgresStoreOptions } from './storage/sql/options';
export type { GroupCommitOptions, GroupCommitStats } from './storage/sql/group-commit';
export { RedisCheckpointStore, type RedisStoreOptions } from './storage/redis/redis-store';
export { TieredCheckpointStore, TierCopyNotDroppedError } from './storage/tiered/tiered-store';
export { WriteBehindCheckpointStore } from './storage/tiered/write-behind-store';
export type { TieredStorageOptions, TieredMode, WriteBehindOptions } from './storage/tiered/options';
