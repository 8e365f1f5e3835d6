import { SideEffectOutsideRunError } from './errors';

/**
 * How a `@SideEffect` method call reaches the runtime. The decorator wraps the method with
 * {@link interceptSideEffect}; the runtime (`core/step/idempotency-guard`) installs the handler when it loads.
 * The slot lives on the ground floor so that decorators never import the runtime.
 */
export type SideEffectInterceptor<O> = (label: string, options: O, invoke: () => unknown, args: unknown[]) => Promise<unknown>;

let installed: SideEffectInterceptor<never> | undefined;

/** Called once by the runtime; a second call replaces the handler (the same function in practice). */
export function installSideEffectInterceptor<O>(handler: SideEffectInterceptor<O>): void {
  installed = handler;
}

/**
 * Entry point of every `@SideEffect` call. Without a runtime loaded there can be no running step, so the
 * call fails as it would outside a step.
 */
export function interceptSideEffect<O extends { name?: string }>(label: string, options: O, invoke: () => unknown, args: unknown[]): Promise<unknown> {
  if (!installed) return Promise.reject(new SideEffectOutsideRunError(label, options.name ?? label));
  return (installed as SideEffectInterceptor<O>)(label, options, invoke, args);
}
