import { WaypointError } from '../../contract/errors';
import type { Class } from '../../decorators/class-type';
import { readParamTypes } from '../../decorators/metadata';
import { readPlan, type PipelinePlan } from '../../core/plan/plan-reader';

/**
 * Refuses a pipeline one of whose agents (or the services they take by type) has constructor parameters
 * but no recorded parameter types: compiled without decorator metadata (esbuild, tsx, vitest's default
 * transform), injection by type cannot work, and a crash test of it would test nothing.
 */
export function assertDecoratorMetadata(pipeline: Class, caller: string): PipelinePlan {
  const plan = readPlan(pipeline);
  const seen = new Set<unknown>();
  const check = (type: unknown, via: string | undefined): void => {
    if (typeof type !== 'function' || seen.has(type)) return;
    seen.add(type);
    const ctor = type as Class;
    const params = readParamTypes(ctor);
    if (params === undefined && ctor.length > 0) throw metadataMissing(caller, plan.name, ctor, via);
    for (const param of params ?? []) if (typeof param === 'function' && param !== Object) check(param, ctor.name);
  };
  for (const agent of plan.agents) check(agent.type, undefined);
  return plan;
}

function metadataMissing(caller: string, pipeline: string, type: Class, via: string | undefined): WaypointError {
  return new WaypointError(
    'KIT_METADATA_MISSING',
    `${caller}: class ${type.name}${via ? ` (a constructor parameter of ${via})` : ''} in pipeline '${pipeline}' takes ${type.length} constructor parameter(s) ` +
      'but their types were not recorded, so the container cannot inject them. Compile the test with decorator metadata: tsc with ' +
      '"experimentalDecorators" and "emitDecoratorMetadata", or swc with decoratorMetadata (vitest: unplugin-swc; jest: @swc/jest); ' +
      "esbuild-based transforms (tsx, vitest's default) emit none. See docs/testing.md.",
  );
}
