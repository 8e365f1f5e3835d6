import { execFile } from 'node:child_process';
import { Session } from 'node:inspector';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { BenchEnvironment, type Backend } from './environment';
import { benchPipeline, type StepHooks } from './pipeline';
import { section, us, type Section } from './report';
import { timedRun } from './timed-run';

/**
 * `--profile`: where a step's time goes. A child process runs a warm-up, then one long run under V8's
 * CPU profiler (the one behind `node --cpu-prof`, started through the inspector only around the measured
 * run, so setup and migrations stay out of it, at a 100 µs sampling interval), and writes the
 * .cpuprofile. The parent attributes self time to functions and files, per step.
 */

interface ProfileChildResult {
  backend: Backend;
  state: 'flat' | 'growing';
  steps: number;
  perStepUs: number;
  profileFile: string;
}

export interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; children?: number[] }[];
  samples: number[];
  timeDeltas: number[];
}

/** Child side: `--child profile <backend> <steps> <flat|growing>`. */
export async function runProfileChild(args: string[]): Promise<ProfileChildResult> {
  const backend = args[0] as Backend;
  const steps = Number(args[1]);
  const state = args[2] === 'growing' ? 'growing' : 'flat';
  const env = new BenchEnvironment();
  try {
    const bw = await env.waypoint(backend, { name: 'profile' });
    const hooks: StepHooks = {};
    const pipeline = benchPipeline({ name: `profile_${backend}`, steps, payloadBytes: 1000, state, hooks });
    await timedRun(bw, pipeline, hooks, steps); // warm-up: JIT, prepared statements, pool
    const { result: measured, profileFile } = await cpuProfiled(`${backend}-${state}`, () => timedRun(bw, pipeline, hooks, steps));
    return { backend, state, steps, perStepUs: measured.perStepUs, profileFile };
  } finally {
    await env.cleanup();
  }
}

/**
 * Runs `body` under V8's CPU profiler (a sample every 100 µs) and writes the profile to
 * `<tmp>/waypoint-bench-<pid>-<label>.cpuprofile`, for a child process to hand to its parent.
 *
 * @example
 * const { result, profileFile } = await cpuProfiled('sqlite-flat', () => timedRun(bw, pipeline, hooks, steps));
 */
export async function cpuProfiled<T>(label: string, body: () => Promise<T>): Promise<{ result: T; profileFile: string }> {
  const session = new Session();
  session.connect();
  const post = <R>(method: string, params?: object) =>
    new Promise<R>((resolve, reject) => session.post(method, params, (error, result) => (error ? reject(error) : resolve(result as R))));
  try {
    await post('Profiler.enable');
    await post('Profiler.setSamplingInterval', { interval: 100 });
    await post('Profiler.start');
    const result = await body();
    const { profile } = await post<{ profile: CpuProfile }>('Profiler.stop');
    const profileFile = path.join(tmpdir(), `waypoint-bench-${process.pid}-${label}.cpuprofile`);
    writeFileSync(profileFile, JSON.stringify(profile));
    return { result, profileFile };
  } finally {
    session.disconnect();
  }
}

/** One row of the profile: self time per step of a function (or file) and its share of the sampled time. */
export interface CostLine {
  name: string;
  where: string;
  selfUsPerStep: number;
  share: number;
}

/** Self time per function and per file of a .cpuprofile, divided by the steps of the profiled run. */
export function summarizeProfile(profile: CpuProfile, steps: number, root: string): { functions: CostLine[]; files: CostLine[]; totalUs: number } {
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const nodeById = new Map(profile.nodes.map((n) => [n.id, n]));
  // The profiler's own work (Profiler.stop serializing the profile) is sampled too: leave it out.
  const ownWork = (id: number): boolean => {
    for (let p: number | undefined = id; p !== undefined; p = parent.get(p)) if (nodeById.get(p)!.callFrame.url === 'node:inspector') return true;
    return false;
  };
  const byNode = new Map<number, number>();
  let total = 0;
  profile.samples.forEach((id, i) => {
    if (ownWork(id)) return;
    const dt = profile.timeDeltas[i] ?? 0;
    byNode.set(id, (byNode.get(id) ?? 0) + dt);
    total += dt;
  });
  // A native frame (a builtin, a C++ binding) is named after its nearest JavaScript caller, so
  // "dispatch" says whose dispatch it is.
  const callerOf = (id: number): string => {
    for (let p = parent.get(id); p !== undefined; p = parent.get(p)) {
      const frame = nodeById.get(p)!.callFrame;
      if (frame.url) return ` < ${frame.functionName || '(anonymous)'} ${locate(frame.url, root)}:${frame.lineNumber + 1}`;
    }
    return '';
  };
  const functions = new Map<string, CostLine>();
  const files = new Map<string, CostLine>();
  for (const node of profile.nodes) {
    const self = byNode.get(node.id) ?? 0;
    if (self === 0) continue;
    const native = !node.callFrame.url && !node.callFrame.functionName.startsWith('(');
    const where = native ? `native${callerOf(node.id)}` : locate(node.callFrame.url, root);
    const name = node.callFrame.functionName || (node.callFrame.url ? '(anonymous)' : where);
    const fKey = `${name}@${where}:${node.callFrame.lineNumber}`;
    const f = functions.get(fKey) ?? { name, where: node.callFrame.url ? `${where}:${node.callFrame.lineNumber + 1}` : where, selfUsPerStep: 0, share: 0 };
    f.selfUsPerStep += self / steps;
    functions.set(fKey, f);
    const fileKey = native ? '(native / V8)' : where;
    const file = files.get(fileKey) ?? { name: fileKey, where: fileKey, selfUsPerStep: 0, share: 0 };
    file.selfUsPerStep += self / steps;
    files.set(fileKey, file);
  }
  const finish = (m: Map<string, CostLine>) => [...m.values()].map((l) => ({ ...l, share: (l.selfUsPerStep * steps) / total })).sort((a, b) => b.selfUsPerStep - a.selfUsPerStep);
  return { functions: finish(functions), files: finish(files), totalUs: total / steps };
}

/** A readable location: a path in this repository (compiled .js shown as its .ts source), a package, or a V8 pseudo-frame. */
function locate(url: string, root: string): string {
  if (!url) return '(native / V8)';
  const file = url.replace(/^file:\/\//, '');
  const nm = file.lastIndexOf('/node_modules/');
  if (nm >= 0)
    return `node_modules/${file
      .slice(nm + 14)
      .split('/')
      .slice(0, file.slice(nm + 14).startsWith('@') ? 2 : 1)
      .join('/')}`;
  if (file.startsWith('node:')) return file;
  if (file.startsWith(root)) return path.relative(root, file).replace(/\.js$/, '.ts');
  return file;
}

function spawnProfileChild(backend: Backend, steps: number, state: 'flat' | 'growing'): Promise<ProfileChildResult> {
  const entry = path.join(__dirname, 'index.js');
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [entry, '--child', 'profile', backend, String(steps), state], { maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (error) return reject(new Error(`profile child (${backend}) failed: ${stderr.trim() || error.message}`));
      resolve(JSON.parse(stdout.trim().split('\n').pop()!) as ProfileChildResult);
    });
  });
}

/** The `--profile` section. @example sections.push(await profileReport({ quick: false }, log)); */
export async function profileReport(options: { quick: boolean }, progress: (line: string) => void): Promise<Section> {
  const out = section(
    'profile',
    'CPU profile of the step loop: top self-time costs per step',
    'V8 CPU profiler (inspector, 100 µs sampling) around one measured run after a warm-up; self time / steps; paths are the compiled files shown as their .ts sources (line numbers of the .js)',
    ['backend', 'function', 'where', 'self / step', 'share'],
  );
  const root = path.resolve(__dirname, '..');
  const runs = [
    ['memory', options.quick ? 500 : 3000, 'flat'],
    ['postgres', options.quick ? 300 : 1500, 'flat'],
    ['memory', options.quick ? 500 : 2000, 'growing'],
  ] as const;
  for (const [backend, steps, state] of runs) {
    progress(`profile: ${backend}, ${steps} steps, ${state} state`);
    const child = await spawnProfileChild(backend, steps, state);
    const profile = JSON.parse(readFileSync(child.profileFile, 'utf8')) as CpuProfile;
    rmSync(child.profileFile, { force: true });
    const summary = summarizeProfile(profile, child.steps, root);
    out.rows.push([`${backend}, ${state} state`, `(whole step: ${us(child.perStepUs)} wall, ${us(summary.totalUs)} sampled incl. idle)`, '', '', '']);
    for (const f of summary.files.slice(0, 8)) out.rows.push(['', '[file]', f.where, us(f.selfUsPerStep), `${(f.share * 100).toFixed(1)}%`]);
    for (const f of summary.functions.slice(0, 15)) out.rows.push(['', f.name, f.where, us(f.selfUsPerStep), `${(f.share * 100).toFixed(1)}%`]);
    out.figures[`${backend}:${state}`] = { perStepUs: child.perStepUs, files: summary.files.slice(0, 30), functions: summary.functions.slice(0, 60) };
  }
  return out;
}
