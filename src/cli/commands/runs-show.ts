import type { RunRecord } from '../../contract/checkpoint-store';
import { isRuntimeOperation } from '../../core/history/resume-base';
import { formatAge, formatBytes, formatDuration, parseCount } from '../durations';
import { EXIT, type ExitCode, runNotFound } from '../exit-codes';
import { clip, printJson, table, type CliIo } from '../output';
import { assertVerifiable } from '../integrity-scan';
import { openSession, type GlobalOptions } from '../session';
import { buildTimeline, type EffectView, type Timeline } from '../timeline';
import { buildRunTree, isFlowRun, type RunTree } from '../run-tree';
import { DEFAULT_ITEMS_SHOWN, renderTree, type ItemsShown } from '../run-tree-view';
import { planOf, summarize } from './runs-list';
import { runProgress, type RunProgress } from '../../core/history/run-progress';
import { progressText } from '../progress';
import { streamSummary, streamSummaryText, type StreamSummary } from '../stream-summary';
import { MODEL_OPERATION, TOOL_OPERATION_PREFIX, type AiUsage, type StepAiUsage } from '../../integrations/ai/usage';

export interface ShowOptions {
  gapMs?: string;
  /** forEach items listed one by one in the tree: a count or `all` (default 3, plus failed and unfinished ones). */
  items?: string;
}

/** `waypoint-durable runs show <id>`: the run and its step timeline (exit 4 when a row is corrupted). */
export async function runsShow(globals: GlobalOptions, runId: string, options: ShowOptions, io: CliIo): Promise<ExitCode> {
  const gapMs = options.gapMs === undefined ? undefined : parseCount(options.gapMs, '--gap-ms', 0);
  const items: ItemsShown = options.items === undefined ? DEFAULT_ITEMS_SHOWN : options.items === 'all' ? 'all' : parseCount(options.items, '--items', 0);
  const session = await openSession(globals, io, { command: 'runs show' });
  try {
    const store = session.waypoint.store;
    const loaded = await store.loadRun(runId);
    if (!loaded) throw runNotFound(runId, session.storeDisplay);
    assertVerifiable(runId, loaded.steps, { encrypted: session.encrypted, hmac: session.integrity.hmacKey !== undefined });
    // A resume snapshot is the runtime's own record, not a side effect.
    const operations = (await store.listOperations(runId)).filter((op) => !isRuntimeOperation(op));
    const plan = session.plans.get(loaded.run.pipelineName);
    const timeline = buildTimeline(loaded.run, loaded.steps, operations, { integrity: session.integrity, gapMs, plan });
    // A store without the parent filter would list every run: keep only this run's children.
    const children = (await store.listRuns({ parentRunId: runId })).filter((child) => child.parentRunId === runId);
    const tree = isFlowRun(loaded.steps, children, plan) ? buildRunTree(loaded.run, loaded.steps, operations, children, plan) : undefined;
    const corrupted = timeline.entries.some((e) => e.corrupted !== null);
    const progress = runProgress(loaded.run, loaded.steps, planOf(session.plans, loaded.run), children);
    const stream = await streamSummary(store, runId);
    if (globals.json) {
      printJson(io, {
        run: { ...summarize(loaded.run, new Date(), progress), metadata: metadataOf(loaded.run) },
        timeline,
        ...(tree ? { tree } : {}),
        ...(stream ? { stream } : {}),
      });
    } else io.out(renderShow(loaded.run, timeline, new Date(), tree && { tree, items }, progress, stream ?? undefined));
    return corrupted ? EXIT.CORRUPTED : EXIT.OK;
  } finally {
    await session.close();
  }
}

/**
 * The human view of `runs show`: a header, then one line per checkpoint, resumes marked between them;
 * for a control-flow run, the tree of its constructs instead of the flat list.
 */
export function renderShow(run: RunRecord, timeline: Timeline, now: Date, flow?: { tree: RunTree; items: ItemsShown }, progress?: RunProgress, stream?: StreamSummary): string {
  const lines = [...headerLines(run, timeline, now, progress), ...(stream ? [`  output    ${streamSummaryText(run.runId, stream)}`] : []), ''];
  if (flow) return lines.join('\n') + '\n' + renderFlow(timeline, flow.tree, flow.items).join('\n') + '\n';
  return lines.join('\n') + '\n' + renderFlat(timeline).join('\n') + '\n';
}

/** The header of `runs show`: the run, who created it, its progress, and its lease, parent, error and hint when it has them. */
function headerLines(run: RunRecord, timeline: Timeline, now: Date, progress: RunProgress | undefined): string[] {
  const summary = summarize(run, now, progress);
  const meta = metadataOf(run);
  // The default worker id is `host:pid:random`: name host and pid separately only when it does not.
  const worker = meta.worker ?? '';
  const where = worker.startsWith(`${meta.host}:${meta.pid}:`) ? [] : [meta.host && `on ${meta.host}`, meta.pid && `pid ${meta.pid}`];
  const origin = meta.forkedFrom ? `forked from ${meta.forkedFrom} at sequence ${meta.atSequence}` : [worker, ...where].filter(Boolean).join(' ');
  const steps = timeline.entries.filter((e) => e.kind === 'step').length;
  const done = progress ? `${progressText(progress)}; ` : '';
  const lines = [
    `Run ${run.runId}: ${run.pipelineName}@${run.pipelineVersion}, ${summary.stale ? 'running (stale: no live worker)' : run.status}`,
    `  created   ${run.createdAt.toISOString()}${origin ? ` by ${origin}` : ''}`,
    `  updated   ${run.updatedAt.toISOString()} (${formatAge(run.updatedAt, now)}; ${formatDuration(run.updatedAt.getTime() - run.createdAt.getTime())} after creation)`,
    `  progress  ${done}${run.lastSequence} checkpoint(s), ${steps} step row(s); lease taken ${timeline.leaseEpoch} time(s); resumed ${timeline.resumes} time(s)`,
  ];
  if (summary.leaseOwner) lines.push(`  lease     ${summary.leaseOwner}, expires ${formatAge(summary.leaseExpiresAt!, now)}`);
  else if (summary.stale && run.leaseOwner) {
    const expiry = run.leaseExpiresAt;
    lines.push(
      `  lease     ${run.leaseOwner}: ${expiry && expiry > now ? `no such process on this host any more (the lease would expire ${formatAge(expiry, now)})` : `expired ${expiry ? formatAge(expiry, now) : ''}`}`,
    );
  }
  const parent = run.parentRunId ?? meta.parentRunId;
  if (parent) lines.push(`  parent    ${parent}${meta.itemIndex !== undefined ? ` (item ${meta.itemIndex} of its forEach)` : ''}`);
  if (summary.error) lines.push(`  error     ${summary.error}`);
  if (run.resumeHint) lines.push(`  hint      ${run.resumeHint}`);
  return lines;
}

/** The table rows of a flat timeline, the notes under each row (by row index), and the resume marks before rows. */
interface FlatRows {
  rows: string[][];
  notes: Map<number, string[]>;
  before: Map<number, string>;
}

/** A straight-line run: one table line per checkpoint and pending step, resumes marked between them, then the signals. */
function renderFlat(timeline: Timeline): string[] {
  const { rows, notes, before } = flatRows(timeline);
  const rendered = table(['SEQ', 'STEP', 'START', 'DURATION', 'ATTEMPT', 'SIZE', 'SIDE EFFECTS'], rows, [true, false, true, true, true, true, false]).trimEnd().split('\n');
  const indent = (text: string) => `  ${text}`;
  const out = [indent(rendered[0])];
  rendered.slice(1).forEach((line, index) => {
    if (before.has(index)) out.push(before.get(index)!);
    out.push(indent(line));
    for (const note of notes.get(index) ?? []) out.push(`        ↳ ${note}`);
  });
  if (rows.length === 0) out.push('  (no checkpoints yet)');
  for (const signal of timeline.signals) out.push(`  signal '${signal.name}' delivered ${signal.at.toISOString()}`);
  out.push(
    '',
    `  START is the time since the run was created. A pause over ${formatDuration(timeline.gapThresholdMs)} between checkpoints, once the lease was taken again, marks a resume.`,
  );
  return out;
}

function flatRows(timeline: Timeline): FlatRows {
  const rows: string[][] = [];
  const notes = new Map<number, string[]>();
  const before = new Map<number, string>();
  timeline.entries.forEach((entry, index) => {
    if (entry.resumedBefore) before.set(index, `  -- resumed: ${formatDuration(entry.resumedBefore.gapMs)} without a checkpoint, then ${entry.resumedBefore.why} --`);
    const label = entry.kind === 'base' ? '(base snapshot: earlier steps folded by retention)' : entry.kind === 'patch' ? '(state patch)' : entry.step;
    rows.push([
      `${entry.corrupted ? '!' : ''}${entry.sequence}`,
      label,
      formatOffset(entry.offsetMs),
      formatDuration(entry.durationMs),
      String(entry.attempt),
      formatBytes(entry.bytes),
      entry.sideEffects
        .filter((e) => !isAiCall(e))
        .map(effectText)
        .join(', '),
    ]);
    const sub = [
      ...(entry.ai ? [aiText(entry.ai)] : []),
      ...entry.failedAttempts.map((f) => `attempt ${f.attempt} failed: ${clip(f.error, 100)}`),
      ...(entry.corrupted ? [`CORRUPTED: ${entry.corrupted}`] : []),
    ];
    if (sub.length) notes.set(index, sub);
  });
  for (const pending of timeline.pending) {
    rows.push(['-', pending.step, '', '', '', '', [pending.next ? 'next' : 'pending', ...pending.sideEffects.filter((e) => !isAiCall(e)).map(effectText)].join(', ')]);
    const index = rows.length - 1;
    const sub = [...(pending.ai ? [aiText(pending.ai)] : []), ...pending.failedAttempts.map((f) => `attempt ${f.attempt} failed: ${clip(f.error, 100)}`)];
    if (sub.length) notes.set(index, sub);
  }
  return { rows, notes, before };
}

/** A control-flow run: its tree, then what the flat view would flag (corrupted rows, resumes, signals). */
function renderFlow(timeline: Timeline, tree: RunTree, items: ItemsShown): string[] {
  const out = renderTree(tree, { items });
  if (out.length === 0) out.push('  (no checkpoints yet)');
  for (const entry of timeline.entries) if (entry.corrupted) out.push(`  !${entry.sequence} ${entry.step}: CORRUPTED: ${entry.corrupted}`);
  out.push(...flowEffects(timeline));
  if (timeline.resumes) out.push(`  resumed ${timeline.resumes} time(s): --json has the flat timeline with where`);
  for (const signal of timeline.signals) out.push(`  signal '${signal.name}' delivered ${signal.at.toISOString()}`);
  return out;
}

/**
 * The side effects of a control-flow run, one line per step that has any (the tree draws steps, not their
 * effects): the same operations the flat view's SIDE EFFECTS column and `--json` show.
 */
function flowEffects(timeline: Timeline): string[] {
  const lines: string[] = [];
  for (const entry of timeline.entries) {
    const effects = entry.sideEffects.filter((e) => !isAiCall(e)).map(effectText);
    if (effects.length) lines.push(`    ${entry.sequence} ${entry.step}: ${effects.join(', ')}`);
    if (entry.ai) lines.push(`    ${entry.sequence} ${entry.step}: ${aiText(entry.ai)}`);
  }
  for (const pending of timeline.pending) {
    const effects = pending.sideEffects.filter((e) => !isAiCall(e)).map(effectText);
    if (effects.length) lines.push(`    - ${pending.step} (not recorded): ${effects.join(', ')}`);
    if (pending.ai) lines.push(`    - ${pending.step} (not recorded): ${aiText(pending.ai)}`);
  }
  return lines.length ? ['', '  side effects', ...lines] : [];
}

/** Model and tool calls of `waypoint/ai` are summed in their own line instead of listed one by one. */
function isAiCall(effect: EffectView): boolean {
  return effect.state === 'committed' && (effect.name.startsWith(MODEL_OPERATION) || effect.name.startsWith(TOOL_OPERATION_PREFIX));
}

/** `ai: 12 model calls, 1,494 tokens (1,410 in, 84 out), 11 tool calls; resume reused 6 model calls (...)`. */
export function aiText(usage: StepAiUsage): string {
  const n = (value: number) => value.toLocaleString('en-US');
  const calls = (u: AiUsage) =>
    `${n(u.modelCalls)} model call(s), ${n(u.inputTokens + u.outputTokens)} tokens (${n(u.inputTokens)} in, ${n(u.outputTokens)} out), ${n(u.toolCalls)} tool call(s)`;
  const reused = usage.reused;
  const saved = reused.modelCalls + reused.toolCalls > 0 ? `; not repeated on resume: ${calls(reused)}` : '';
  return `ai: ${calls(usage)}${saved}`;
}

function effectText(effect: EffectView): string {
  const attempts = effect.attempts === 1 ? '' : ` after ${effect.attempts} attempts`;
  return `${effect.name}: ${effect.state}${attempts}${effect.error && effect.state !== 'committed' ? ` (${clip(effect.error, 60)})` : ''}`;
}

function formatOffset(ms: number): string {
  return ms < 60_000 ? `+${(ms / 1000).toFixed(3)}s` : `+${formatDuration(ms)}`;
}

function metadataOf(run: RunRecord): Record<string, string> {
  try {
    return (JSON.parse(run.metadata) as Record<string, string> | null) ?? {};
  } catch {
    return {};
  }
}
