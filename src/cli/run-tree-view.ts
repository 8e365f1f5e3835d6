import { formatDuration } from './durations';
import { clip } from './output';
import type { RunTree, TreeConstruct, TreeNode, TreePart, TreeStatus } from './run-tree';

/** How many forEach items `runs show` lists one by one: a number, or every item. */
export type ItemsShown = number | 'all';

/** The first items of a forEach listed by default; failed and running ones are listed too, up to UNFINISHED_SHOWN. */
export const DEFAULT_ITEMS_SHOWN = 3;
const UNFINISHED_SHOWN = 10;

/**
 * The human view of a control-flow run's tree, one line per step, construct, branch, iteration and listed
 * item, indented by depth. A forEach shows its counts by status and lists only its first items plus the
 * failed and unfinished ones unless `items` is 'all', so a 1,000-item forEach stays a screenful.
 *
 * @example
 * io.out(renderTree(buildRunTree(run, steps, operations, children), { items: 3 }).join('\n'));
 */
export function renderTree(tree: RunTree, options: { items: ItemsShown }): string[] {
  const lines: string[] = [];
  const walk = (nodes: readonly TreeNode[], depth: number) => {
    for (const node of nodes) {
      if (node.kind === 'step') lines.push(`${pad(depth)}${stepLine(node)}`);
      else construct(node, depth);
    }
  };
  const partLines = (part: TreePart, depth: number, note: string) => {
    lines.push(`${pad(depth)}[${part.key}] ${part.status}${note}`);
    walk(part.children, depth + 1);
  };
  const construct = (node: TreeConstruct, depth: number) => {
    lines.push(`${pad(depth)}${headline(node)}`);
    const inner = depth + 1;
    if (node.kind === 'loop') {
      for (const part of node.parts) partLines(part, inner, part.until === true ? ', then stop' : part.until === false ? ', then continue' : '');
    } else if (node.kind === 'forEach') {
      const shown = shownItems(node.parts, options.items);
      for (const part of shown) {
        if (part.childRunId !== undefined)
          lines.push(`${pad(inner)}[${part.key}] ${part.status}  child run ${part.childRunId}${part.childRunStatus ? ` (${part.childRunStatus})` : ' (not created yet)'}`);
        else partLines(part, inner, '');
      }
      const hidden = node.parts.length - shown.length;
      if (hidden > 0)
        lines.push(`${pad(inner)}... ${hidden} more item(s) not listed (${countText(countsOf(node.parts.filter((p) => !shown.includes(p))))}); --items all lists every item`);
    } else {
      for (const part of node.parts) partLines(part, inner, '');
    }
  };
  walk(tree.nodes, 1);
  if (tree.otherChildren.length) {
    lines.push(`${pad(1)}child runs: ${tree.otherChildren.length}`);
    for (const child of tree.otherChildren) lines.push(`${pad(2)}${child.runId} (${child.status})`);
  }
  return lines;
}

function headline(node: TreeConstruct): string {
  switch (node.kind) {
    case 'parallel':
      return `${node.label}: ${node.parts.length} branch(es), ${node.status}`;
    case 'loop': {
      const last = node.parts[node.parts.length - 1];
      const end = last?.until === true ? `stopped after iteration ${last.key}` : node.status === 'failed' ? 'failed' : node.parts.length ? 'not stopped yet' : 'not started';
      return `${node.label}: ${node.parts.length} iteration(s), ${end}`;
    }
    case 'branch': {
      const cases = node.cases ? ` (cases: ${node.cases.join(', ')})` : '';
      return node.chosen === null ? `${node.label}: not decided yet${cases}` : `${node.label}: case '${node.chosen}' chosen${cases}, ${node.status}`;
    }
    case 'forEach': {
      const over = node.parts.some((p) => p.childRunId !== undefined) ? ` over ${node.childPipeline ? `pipeline ${node.childPipeline}` : 'child runs'}` : '';
      if (node.itemCount === null && node.parts.length === 0) return `${node.label}${over}: items not taken yet`;
      return `${node.label}${over}: ${node.itemCount ?? node.parts.length} item(s): ${countText(node.counts!)}`;
    }
    default:
      return `${node.label}: ${node.parts.length} part(s), ${node.status}`;
  }
}

function stepLine(step: Extract<TreeNode, { kind: 'step' }>): string {
  const facts: string[] = [step.status];
  if (step.sequence !== null) facts.push(`seq ${step.sequence}`);
  if (step.durationMs !== null) facts.push(formatDuration(step.durationMs));
  if (step.attempt !== null && step.attempt > 1) facts.push(`attempt ${step.attempt}`);
  if (step.error) facts.push(clip(step.error, 100));
  return `${step.step}  ${facts.join(', ')}`;
}

/** The first `items` parts, then the failed and running ones (at most UNFINISHED_SHOWN more). */
function shownItems(parts: readonly TreePart[], items: ItemsShown): TreePart[] {
  if (items === 'all') return [...parts];
  const first = parts.slice(0, items);
  // Pending items are all alike (nothing ran): counted, not listed.
  const extra = parts
    .slice(items)
    .filter((p) => p.status === 'failed' || p.status === 'running')
    .slice(0, UNFINISHED_SHOWN);
  const keep = new Set([...first, ...extra]);
  return parts.filter((p) => keep.has(p));
}

function countsOf(parts: readonly TreePart[]): Record<TreeStatus, number> {
  const counts: Record<TreeStatus, number> = { completed: 0, skipped: 0, failed: 0, running: 0, queued: 0, pending: 0 };
  for (const p of parts) counts[p.status] += 1;
  return counts;
}

/** `997 completed, 1 skipped, 2 pending`: the non-zero counts. */
function countText(counts: Record<TreeStatus, number>): string {
  const parts = (Object.entries(counts) as [TreeStatus, number][]).filter(([, n]) => n > 0).map(([status, n]) => `${n.toLocaleString('en-US')} ${status}`);
  return parts.length ? parts.join(', ') : 'none';
}

function pad(depth: number): string {
  return '  '.repeat(depth);
}
