/**
 * Every `code` a {@link WaypointError} can carry, with what it means and what to do: the one table that
 * types `WaypointError.code` (so a misspelt code in a check does not compile) and that docs/errors.md
 * shows (test/docs/error-codes.test.ts keeps the two equal). A new code is added here first.
 *
 * @example
 * catch (err) { if (err instanceof WaypointError) console.error(err.code, WAYPOINT_ERROR_CODES[err.code]); }
 */
export const WAYPOINT_ERROR_CODES = codeTable({
  ACTIONS_DISABLED: 'The UI server refused a resume, cancel, signal or fork because actions are off: start it with --allow-actions (allowActions: true) and a Waypoint.',
  APPROVAL_LINK_EXPIRED: "An approval link's token has expired and delivered nothing: ask the run's owner for a new link (waypoint.approvalLink).",
  APPROVAL_LINK_INVALID:
    'An approval token was altered, signed with another key, malformed, or names another run (a later run under the same id), and delivered nothing: use the link as it was sent, or ask for a new one.',
  APPROVAL_LINK_USED: 'The signal an approval link carries was already delivered to its run (the link was used, or the decision was made another way); nothing more was delivered.',
  ARCHIVE_UNAVAILABLE:
    'The archive sink (S3, a directory) failed to write or read an archive object, and nothing was deleted from the store: retry the prune, compaction or restore once the archive answers.',
  BAD_BODY: 'A UI API request body has an unknown or invalid field: send only the fields the endpoint lists, with the types its message names.',
  BAD_QUERY: 'A UI API query parameter is unknown or invalid: send only the parameters the message lists, with values in their range.',
  BAD_SEQUENCE: 'A checkpoint sequence in a UI API path is not a non-negative integer: pass the sequence number as shown in the run.',
  CHECKPOINT_CORRUPTED:
    'A stored checkpoint of the run failed its integrity check or cannot be decoded: restore the row from a backup, or fork the run from an earlier sequence with waypoint.fork().',
  CHILD_RUNS_UNAVAILABLE:
    'A step runs child pipelines but the executor running it cannot start child runs: run the pipeline through a Waypoint (waypoint.run, resume or a queue worker).',
  CHILD_RUN_FAILED:
    "A child run (an item of a forEach over a @Pipeline class) failed with an error whose code is not Waypoint's (kept as the error's cause), or without a stored error: read the child run's error, fix the cause and resume the parent.",
  CLI_MODULE: 'The module given to the CLI with --module failed to load: fix what it throws, or check the --module path.',
  CLI_USAGE: 'A CLI argument or option value is wrong (exit 2): correct it as the message says; --help lists the options.',
  CRASH_POINT: 'The test kit abandoned an execution at a crash point, as a process death would; it is seen only inside crashTest: nothing to do.',
  DURABLE_CONTEXT_MISMATCH: "durable() was given another step's context than the one running: pass the running step's own ctx.",
  DURABLE_RECORD_MISMATCH: 'A recorded model call no longer matches the one the code now makes (its order or request changed): start a new run, or revert the change.',
  DURABLE_REQUEST_CHANGED:
    "A durable() call's request differs from the one recorded for it, and onRequestChange is 'error': revert the change, start a new run, or pass onRequestChange: 'rerun'.",
  EFFECT_AFTER_TRANSACTION:
    "A non-transactional side effect was called after a transactional one opened the step's transaction on a single-writer store: call non-transactional effects first, or make it transactional.",
  FORK_PATCH_NO_STEP:
    'A fork with a state patch has no recorded step after the fork point to apply the patch before: pass patchBefore with the step path, or fork from an earlier point.',
  HTTP_CONFIG: 'createHttpHandler was given options it cannot serve with (no authorize, no pipelines, a bad basePath or approval key): correct the option the message names.',
  INJECTION_FAILED:
    'The container could not build an agent (a parameter without decorator metadata, or an unbound dependency): bind the dependency or enable emitDecoratorMetadata, as the message names.',
  INPUT_MISMATCH: "A run with this id already exists with a different input: omit 'input' (or pass the original) to resume it, or use a new runId.",
  INVALID_ARGUMENT: 'An argument to a Waypoint call is out of range or of the wrong type (a run id, a name, a number): pass a value as the message describes.',
  INVALID_JOB: 'A queue job does not hold a Waypoint run job ({ runId, pipeline, epoch, enqueuedAt }): enqueue runs only through Waypoint, and remove the foreign job.',
  INVALID_KEY: "An encryption key is not 32 bytes, or its id is empty or contains ':': give 32-byte AES-256 keys under non-empty ids without ':'.",
  INVALID_OPTIONS: 'An options object passed to Waypoint, a store, a queue or an integration has an invalid value: correct the option the message names.',
  INVALID_RUN_ID:
    'A run id is not a string, is empty or too long, or holds control characters, a lone surrogate or outer whitespace (or, in a UI path, bad percent-encoding): use 1 to 200 printable characters.',
  INVALID_SIGNAL_NAME:
    'A signal name is empty, too long, or holds control, line-separator or bidirectional characters or outer whitespace; nothing was stored: use a plain name such as approval.',
  INVALID_STATE: "The pipeline input (or a state read back from storage) does not satisfy the pipeline's state class: fix the properties listed in the error's issues.",
  INVALID_STORE_OPTIONS: 'A checkpoint store option (a schema, table prefix or identifier) is invalid: use letters, digits and underscores, starting with a letter or underscore.',
  INVALID_STREAM_EVENT:
    "A batch appended to a run's output stream is empty or holds an event that is not a 'part', 'retract' or 'status' event with fields of the right types, and nothing was written: fix the event the message names.",
  INVALID_TRANSITION: 'The run is in a status that does not allow the requested change (e.g. cancelling a finished run): read its status first and act on what it allows.',
  ITEM_FAILED: 'An item of a forEach failed, so the forEach step failed: see the cause for the item and its error, fix it and resume the run.',
  ITEM_RECORDS_FOLDED:
    "An item run's rows were folded by retention, so its step outputs for the parent's forEach are gone: raise retention's compactEvery and run the item again (fork it).",
  ITEM_RUN_CHANGED: 'A completed item run was deleted or changed before its parent read it: resume the parent again.',
  KIT_METADATA_MISSING:
    "The test kit (crashTest, testEnvironment) found a class whose constructor parameter types were not recorded, so injection by type cannot work: compile with tsc or swc with decorator metadata (emitDecoratorMetadata, swc's decoratorMetadata), not an esbuild-based transform.",
  KIT_REFERENCE_FAILED:
    "crashTest's reference run (the run without a crash) did not complete, so there is nothing to compare the crashed runs with: make the pipeline complete without a crash first (give crashTest the signals it waits for).",
  KIT_RUN_STUCK:
    "testEnvironment's runUntil could not bring the run to the status asked for (it ended in another, or waits for a signal nobody sends): send the signal, or ask for the status the run reaches.",
  LANGGRAPH_INVALID_CONFIG: 'WaypointCheckpointSaver was called without a config it needs (e.g. no thread_id): pass it in configurable, e.g. { configurable: { thread_id } }.',
  LANGGRAPH_PARENT_MISSING:
    "A LangGraph checkpoint's parent no longer exists (pruned or deleted), so its unchanged channels cannot be carried over; nothing was written: resume the thread from its latest checkpoint or keep more checkpoints.",
  LEASE_LOST: 'This executor lost its lease on the run (another worker now owns it) and stopped, recording nothing further: let the new owner finish the run.',
  LOOP_LIMIT:
    'A loop ran its maxIterations without its until condition holding, and the run failed with every iteration kept: raise maxIterations or fix the condition, then fork the run.',
  METHOD_NOT_ALLOWED: 'An HTTP handler route was called with another method than its own: use the method the message (and the Allow header) names.',
  MISSING_DEPENDENCY:
    'An optional package a backend, queue or integration needs is not installed or has no working native build: install (or approve and rebuild) the package the message names.',
  NO_ACTIVE_OPERATION: 'currentOperation() was called outside a side effect: call it from a @SideEffect method or a guardedExecute callback.',
  NO_SUCH_CHECKPOINT: 'The run has no checkpoint with that sequence in the store (older ones may have been folded by retention): pick a sequence in the range the message gives.',
  NO_SUCH_STEP:
    "waypoint.fork({ fromStep }) named a step the run has not recorded, or one that several recorded steps match: use the 'agentId/stepName' path (under control flow, the step's path) of one recorded step.",
  NO_TRANSACTION: 'currentTransaction() was called outside a transactional side effect: mark the effect @SideEffect({ transactional: true }) and call it inside.',
  NON_RETRYABLE: 'A step threw a NonRetryableError, so it failed at once without retries: fix the cause the error carries, then resume the run.',
  NOT_ARCHIVED:
    'A restore found nothing of the run in the archive, or only folded rows without the run row (archived by a release before run rows were): check the run id and the archive sink, or fork the run from what the store holds.',
  ORIGIN_REFUSED: "A state-changing request came from a browser page of another origin: send it from the app's own origin, or list that origin in allowedOrigins.",
  PARALLEL_CONFLICT: 'Two parallel branches set the same state property: let only one branch set it, or give the property a @Reducer in the state class.',
  PAYLOAD_TOO_LARGE: "A UI API request body is larger than the endpoint's limit (16 KiB, or a signal's payload limit): send a smaller body.",
  PIPELINE_DEFINITION: 'A decorator or pipeline definition is wrong (found when the class is declared or its plan is built): fix the class as the message says.',
  PIPELINE_MISMATCH: 'The run was started by another pipeline than the one given: use a new runId for this pipeline, or resume the run with its own pipeline.',
  PIPELINE_NOT_REGISTERED: "The run's pipeline is not known to this Waypoint: pass it in Waypoint.create({ pipelines }) or call waypoint.register(Pipeline).",
  PLAN_MISMATCH:
    "The run's recorded steps do not match the pipeline's steps under the same version, or a migration left steps the pipeline does not have: bump the pipeline version and register a migration that renames or drops them, or restore the previous code.",
  QUEUE_CLOSED: 'The run queue was closed and cannot be used again: create a new one.',
  QUEUE_NOT_CONFIGURED: 'A call needs a run queue and none is bound: pass { queue } or bind pgBossQueue / bullmqQueue.',
  QUEUE_SEND_FAILED: 'The queue did not accept a run job and holds no job with its id: check that the queue exists in its schema, then enqueue again.',
  QUEUE_UNAVAILABLE: 'The run queue could not be reached or failed an operation: retry once the queue backend (PostgreSQL or Redis) answers.',
  RESUME_IN_PROGRESS: 'The UI server is already resuming this run: wait for that resume to finish or pause.',
  ROUTE_NOT_FOUND: "No route of the HTTP handler matches the request's path: check the path against docs/http.md and the handler's basePath.",
  RUN_CANCELLED: 'The run was cancelled and cannot be resumed: fork it or start a new run.',
  RUN_EXISTS: 'A run with that id already exists: choose another run id.',
  RUN_FINISHED: 'The run has finished (completed, failed or cancelled), so it cannot be signalled or changed: fork it and act on the fork.',
  RUN_ID_TAKEN: 'POST /runs named a run id already used by a run of another pipeline or account: start the run under another id, or omit runId to get a fresh one.',
  RUN_LOCKED: 'Another executor holds the lease on the run: wait for it to finish or for its lease to expire, or pass { waitForLockMs }.',
  RUN_NOT_FOUND: 'No run with that id is in the store: check the run id, or point at the store that holds it.',
  RUN_NOT_RETRIED:
    'The run had failed when this execution (a fleet wake-up or recovery) took its lease, and nothing ran: retry it with waypoint.enqueue(...) or waypoint.resume(runId).',
  SECRET_NOT_PROTECTED:
    'A value holds @Secret properties and no encryption key is configured, so nothing was written: configure Waypoint.create({ encryption }) or keep the value out of the state.',
  SELECTOR_FAILED: 'A branch selector or loop condition threw, and nothing was recorded for it: fix it and resume the run.',
  SIDE_EFFECT_FAILED: "A side effect failed and was not marked committed, so the step's next attempt runs it again: fix the cause first.",
  SIDE_EFFECT_OUTSIDE_RUN: 'A side effect was called outside a Waypoint step, so it cannot be guarded: call it from a @Step method, or use guardedExecute(key, fn).',
  SIGNAL_PAYLOAD_TOO_LARGE:
    "A signal's serialized payload is over the limit and nothing was stored: signal a reference to the data, or raise Waypoint.create({ maxSignalPayloadBytes }).",
  STATE_MUTATED: 'A step changed ctx.state (frozen) in place and failed without retries: return the change from the step instead.',
  STATE_NEEDS_PIPELINE:
    'A control-flow run recorded by an earlier release was read by a Waypoint that has not registered its pipeline; its rows do not hold what its constructs joined, so its state cannot be read from them: register the pipeline (pipelines: [...]) with the Waypoint that reads it.',
  STEP_FAILED: 'A step failed after all its attempts: fix the cause and call waypoint.resume(runId) to retry from that step.',
  STEP_TIMEOUT: 'A step attempt exceeded its timeout and was aborted: raise @Step({ timeoutMs }) if the step needs longer.',
  STREAM_LIMIT:
    "ctx.emit() was refused: the part is larger than liveOutput.maxPartBytes, or the run's stream already holds liveOutput.maxEventsPerRun events; nothing was emitted: emit smaller parts (a reference to large data), or raise the limit in Waypoint.create({ liveOutput }).",
  STORE_NOT_INITIALIZED: "The CLI's --store holds no Waypoint store (no file, or no Waypoint tables): check --store, or run waypoint-durable migrate to create it.",
  STORE_REJECTED: 'The checkpoint store refused an operation (a constraint, a bad value or statement) and retrying will not help: change what the cause says it refused.',
  STORE_UNAVAILABLE: 'The checkpoint store could not be reached or failed transiently, and nothing past the last checkpoint was recorded: resume the run once the store answers.',
  STREAMS_UNSUPPORTED:
    "The checkpoint store has no output streams (appendEvents, readEvents, waitForEvents, streamLength), so a run's live output cannot be read: use a store of this package or add the four methods to yours.",
  STREAM_GAP: "A run's output stream has no event at an offset below its length (events were deleted behind Waypoint's back): read on from the offset the message gives.",
  TIER_COPY_NOT_DROPPED: "The tiered store rewrote a run's payloads in PostgreSQL but could not drop its Redis copy: delete the key the message names once Redis answers.",
  TIER_DIVERGED: "The tiered store's Redis and PostgreSQL hold different histories of the run: keep one with store.adoptPostgresCopy(runId) or the other option the message names.",
  TRANSACTION_ABORTED:
    "PostgreSQL aborted the step's transaction after a failed statement: let the error propagate out of the side effect, or wrap a statement that may fail in manager.transaction(...).",
  TRANSACTION_ENDED: "A step's transaction was used after the step attempt ended, and nothing was written: await every transactional side effect inside its step.",
  TRANSACTIONS_UNSUPPORTED:
    'A side effect asked for a transaction the checkpoint store cannot give, and nothing ran: use the SQL store on the database the effect writes to, or drop { transactional: true }.',
  UI_ASSETS_MISSING: "The UI's page script cannot be read: build it with npm run build.",
  UI_CONFIG: 'startUiServer was given options it cannot run with (e.g. a public bind without a token, a bad port): correct the option the message names.',
  UI_LISTEN_FAILED: 'The UI server could not listen on its host and port: choose another port (--port) or stop what is using it.',
  UNAUTHORIZED:
    "The HTTP handler's authorize function refused the request (no or wrong credentials): send the credentials the app checks, such as its session cookie or bearer token.",
  UNDECLARED_STATE: 'strictState is on and a value set properties the state class does not declare, and nothing was written: declare them in the state class or stop setting them.',
  UNKNOWN_BRANCH: 'A branch selector returned a key that is not one of its cases, and nothing was recorded: add the case or fix the selector, then resume.',
  UNKNOWN_PIPELINE: 'POST /runs named a pipeline the HTTP handler does not serve: use one of the names of the pipelines given to createHttpHandler.',
  UNREADABLE_CHECKPOINT:
    "A checkpoint could not be decoded for the UI (e.g. encrypted without the key): start the UI with the Waypoint's own store (waypoint.store), which decrypts.",
  UNSERIALIZABLE_VALUE:
    'A value cannot be stored (a function, a symbol, a class instance, a circular reference) or a stored one cannot be read back here: store plain JSON data, as the path in the message shows.',
  UNSUPPORTED_MEDIA_TYPE: "A UI API request body was not sent as JSON: send it with 'Content-Type: application/json'.",
  VERSION_MISMATCH:
    'The run was checkpointed by another version of the pipeline: register a checkpoint migration in @Pipeline({ migrations }) from the stored version to the current one.',
  WAIT_TIMEOUT: 'ctx.waitFor() waited its timeoutMs for a signal that never came: send the signal, then resume the run, or give a longer timeoutMs.',
});

/**
 * The table frozen, typed with literal keys (they are {@link WaypointErrorCode}) and plain string texts, so
 * the public type lists the codes, not every sentence.
 */
function codeTable<T extends Record<string, string>>(table: T): { readonly [K in keyof T]: string } {
  return Object.freeze(table);
}

/** A code a {@link WaypointError} can carry: one of the keys of {@link WAYPOINT_ERROR_CODES}. */
export type WaypointErrorCode = keyof typeof WAYPOINT_ERROR_CODES;

/** True when `code` is one of the {@link WaypointErrorCode}s (for a code read from storage or a foreign error). */
export function isWaypointErrorCode(code: unknown): code is WaypointErrorCode {
  return typeof code === 'string' && Object.prototype.hasOwnProperty.call(WAYPOINT_ERROR_CODES, code);
}
