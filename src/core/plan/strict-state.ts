import type { CheckpointStore } from '../../contract/checkpoint-store';
import type { Class } from '../../decorators/options';
import { PipelineDefinitionError, UndeclaredStateError } from '../../contract/errors';
import type { FlowNode, PipelinePlan, StateTarget } from './plan-types';
import { declaredTypeOf, propertyPlan, transformerProperties } from '../state/property-validation';

/**
 * `strictState`: the state class is the schema. What a class declares is computed once per class (here,
 * from the metadata the plan reader and the property plan already hold); the per-step check is a lookup
 * of the output's keys in that set, and nothing at all when strictState is off.
 */

const declaredSets = new WeakMap<Class, ReadonlySet<string>>();

/**
 * The properties `stateClass` declares: the own enumerable keys of a new instance (fields with an
 * initializer), every property with class-validator or class-transformer metadata, and the `@Secret` /
 * `@Reducer` properties given. Cached per class.
 *
 * @example
 * class State { ticker = ''; @IsString() title!: string }
 * declaredProperties(State, []); // Set { 'ticker', 'title' }
 */
export function declaredProperties(stateClass: Class, marked: readonly string[]): ReadonlySet<string> {
  let set = declaredSets.get(stateClass);
  if (set) return set;
  set = new Set<string>([...Object.keys(new stateClass()), ...propertyPlan(stateClass).rules.keys(), ...transformerProperties(stateClass), ...marked]);
  declaredSets.set(stateClass, set);
  return set;
}

/**
 * Whether `key` is declared: in the set, or (looked up only for a key outside it, so never on the path of
 * an accepted step) a property TypeScript recorded a `design:type` for, which any other decorator gives.
 */
function isDeclared(stateClass: Class, declared: ReadonlySet<string>, key: string): boolean {
  return declared.has(key) || declaredTypeOf(stateClass, key) !== undefined;
}

/** Every `forEach` `into` of the tree (nested forEach bodies write into their item's frame of the same class). */
export function stateTargets(node: FlowNode | undefined, found: StateTarget[] = []): StateTarget[] {
  if (!node) return found;
  switch (node.kind) {
    case 'agent':
      break;
    case 'sequence':
      node.children.forEach((child) => stateTargets(child, found));
      break;
    case 'parallel':
      node.branches.forEach((child) => stateTargets(child, found));
      break;
    case 'loop':
      stateTargets(node.body, found);
      break;
    case 'branch':
      node.cases.forEach((child) => stateTargets(child, found));
      break;
    case 'forEach':
      found.push({ construct: node.label, property: node.into });
      // A child pipeline's steps write its own state, checked by its own plan.
      if (node.body) stateTargets(node.body, found);
      break;
  }
  return found;
}

/** The targets of `flow` that `stateClass` does not declare. */
export function undeclaredTargetsOf(stateClass: Class | undefined, declared: ReadonlySet<string> | undefined, flow: FlowNode | undefined): StateTarget[] {
  if (!stateClass || !declared) return [];
  return stateTargets(flow).filter((t) => !isDeclared(stateClass, declared, t.property));
}

/** The `PIPELINE_DEFINITION` error for constructs that write undeclared properties under strictState. */
export function undeclaredTargetsError(pipeline: string, stateClass: Class, targets: readonly StateTarget[]): PipelineDefinitionError {
  const list = targets.map((t) => `${t.construct} writes '${t.property}'`).join(', ');
  return new PipelineDefinitionError(
    `Pipeline '${pipeline}' has strictState on, but ${list}, which state class ${stateClass.name} does not declare. ` +
      `Declare ${targets.length > 1 ? 'them' : 'it'} on ${stateClass.name} (for example \`@IsOptional() ${targets[0].property}?: unknown[]\`), or turn strictState off.`,
  );
}

/**
 * The declared set to check a run of `plan` against, or null when strictState does not apply (off for
 * this pipeline, or no state class: nothing to check). The pipeline's own setting wins over the
 * Waypoint's default; under that default, a construct writing an undeclared property is refused here.
 */
export function strictSchema(plan: PipelinePlan, strictDefault: boolean): ReadonlySet<string> | null {
  if (!(plan.strictState ?? strictDefault) || !plan.state || !plan.declared) return null;
  if (plan.undeclaredTargets.length > 0) throw undeclaredTargetsError(plan.name, plan.state, plan.undeclaredTargets);
  return plan.declared;
}

/** What a refused value was, for the message: the run's input, a step's output, a fork's patch. */
export interface UndeclaredWhere {
  runId: string;
  step?: string;
  what: 'input' | 'output' | 'patchState';
}

/**
 * Throws `UNDECLARED_STATE` naming every key of `value` that `plan`'s state class does not declare. The
 * accepted path allocates nothing: a `for...in` over the keys (own data of a decoded copy) and a lookup each.
 */
export function assertDeclared(plan: PipelinePlan, declared: ReadonlySet<string>, value: object, where: UndeclaredWhere): void {
  let undeclared: string[] | null = null;
  for (const key in value) if (!isDeclared(plan.state!, declared, key)) (undeclared ??= []).push(key);
  if (undeclared) throw undeclaredError(plan, undeclared, where);
}

function undeclaredError(plan: PipelinePlan, keys: string[], { runId, step, what }: UndeclaredWhere): UndeclaredStateError {
  const cls = plan.state!.name;
  const names = `propert${keys.length > 1 ? 'ies' : 'y'} ${keys.map((k) => `'${k}'`).join(', ')}`;
  const subject =
    what === 'output'
      ? `Step '${step ?? '?'}' of run '${runId}' returned ${names}`
      : what === 'input'
        ? `The input of run '${runId}' has ${names}`
        : `The patchState of fork '${runId}' sets ${names}`;
  const nothing = what === 'output' ? 'Nothing was recorded and the step is not retried' : 'Nothing was written';
  return new UndeclaredStateError(
    `${subject}, which state class ${cls} of pipeline '${plan.name}' does not declare (strictState is on). ${nothing}: ` +
      `declare ${keys.length > 1 ? 'them' : 'it'} on ${cls} (a field with an initializer or a decorated property, e.g. @IsOptional()), ${what === 'output' ? 'return only declared properties, ' : ''}or turn strictState off.`,
    keys,
    step === undefined ? { runId } : { runId, step },
  );
}

/**
 * Checks a fork's `patchState` against the source run's pipeline when this Waypoint knows it (forking is
 * plan-less otherwise: a patch of a pipeline never registered here is not checked).
 */
export async function assertPatchDeclared(
  store: CheckpointStore,
  pipelines: ReadonlyMap<string, PipelinePlan>,
  strictDefault: boolean,
  sourceRunId: string,
  options: { newRunId: string; patchState?: Record<string, unknown> },
): Promise<void> {
  const patch = options?.patchState;
  if (patch === null || typeof patch !== 'object') return;
  const run = await store.getRun(sourceRunId);
  const plan = run ? pipelines.get(run.pipelineName) : undefined;
  const declared = plan ? strictSchema(plan, strictDefault) : null;
  if (plan && declared) assertDeclared(plan, declared, patch, { runId: options.newRunId, what: 'patchState' });
}

/**
 * A run's input, after refusing (`UNDECLARED_STATE`, nothing written) its undeclared properties when
 * strictState applies to `plan`. A non-object input is returned as it is: `createState` refuses it.
 *
 * @example
 * createState(plan.state, checkedInput(plan, options.strictState, input, runId), { runId });
 */
export function checkedInput(plan: PipelinePlan, strictDefault: boolean, input: unknown, runId: string): unknown {
  const declared = strictSchema(plan, strictDefault);
  if (declared && input !== null && typeof input === 'object' && !Array.isArray(input)) assertDeclared(plan, declared, input, { runId, what: 'input' });
  return input;
}
