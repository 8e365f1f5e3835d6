import type { Container } from 'inversify';
import { InjectionError } from '../../contract/errors';
import type { Agent } from '../../contract/agent';
import type { Class } from '../../decorators/class-type';
import { readParamTypes } from '../../decorators/metadata';

/*
 * Agents come from the pipeline's container, bound to themselves on first use. Inversify's own errors
 * name neither the pipeline nor what to change, and a missing decorator metadata (tsx, vitest's default
 * transform) looks like a bug of the library: they become INJECTION_FAILED saying which agent, which
 * parameter and what to do.
 */

/**
 * A fresh agent of `type` from `container` (bound `toSelf`, transient, the first time).
 *
 * @example
 * const agent = resolveAgent(container, ResearchAgent, 'run-1');
 */
export function resolveAgent<T extends Agent>(container: Container, type: Class<T>, runId: string): T {
  try {
    // toSelf() reads the constructor's metadata: a class without it fails here, before get().
    if (!container.isBound(type)) container.bind(type).toSelf().inTransientScope();
    return container.get<T>(type);
  } catch (error) {
    throw injectionError(type, runId, error);
  }
}

function injectionError(type: Class, runId: string, error: unknown): unknown {
  const message = error instanceof Error ? error.message : String(error);
  const agent = `Agent '${type.name}' of run '${runId}' could not be created`;
  const unbound = /No bindings found for service: "([^"]*)"/.exec(message);
  if (unbound) {
    const service = unbound[1];
    const chain = /Trying to resolve bindings for "([^"]*)"/.exec(message)?.[1];
    const index = (readParamTypes(type) ?? []).findIndex((param) => typeof param === 'function' && param.name === service);
    const parameter = index >= 0 ? `its constructor parameter ${index + 1} (of type ${service})` : `'${service}'${chain ? ` (needed by ${chain})` : ''}`;
    return new InjectionError(
      `${agent}: ${parameter} is not bound in the container. Bind it in a ContainerModule passed to Waypoint.create({ modules }), ` +
        `e.g. new ContainerModule(({ bind }) => { bind(${service}).toSelf(); }), or inject a token that is bound. Nothing ran.`,
      { runId, cause: error },
    );
  }
  const missing = /constructor requires at least (\d+) arguments?, found (\d+)/.exec(message);
  if (missing) {
    return new InjectionError(
      `${agent}: its constructor takes ${missing[1]} parameter(s) but only ${missing[2]} have recorded types. ` +
        'Mark the class @injectable() and compile with "experimentalDecorators" and "emitDecoratorMetadata" using tsc or swc ' +
        "(decoratorMetadata); esbuild-based runners (tsx, vitest's default transform) emit no parameter types. Or name each " +
        'parameter with @inject(token). Nothing ran.',
      { runId, cause: error },
    );
  }
  return error;
}
