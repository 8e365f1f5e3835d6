/**
 * ESM resolve hook registered by hide-module.ts: an `import()` of a package named in WAYPOINT_TEST_HIDE
 * fails as an absent package does (ERR_MODULE_NOT_FOUND), as `require` of it does through the preload.
 */
const hidden = new Set((process.env.WAYPOINT_TEST_HIDE ?? '').split(',').filter(Boolean));

type Next = (specifier: string, context: unknown) => Promise<unknown>;

export async function resolve(specifier: string, context: unknown, next: Next): Promise<unknown> {
  if (hidden.has(specifier)) {
    const error = new Error(`Cannot find package '${specifier}' (hidden by the test)`) as NodeJS.ErrnoException;
    error.code = 'ERR_MODULE_NOT_FOUND';
    throw error;
  }
  return next(specifier, context);
}
