/**
 * Preloaded with `node --require` by tests that need a package to be missing: WAYPOINT_TEST_HIDE lists
 * what to hide, comma-separated. A package name makes `require` of it fail as an absent package does
 * (MODULE_NOT_FOUND); `better-sqlite3-native` keeps better-sqlite3's JavaScript but not its addon, as an
 * install whose build script never ran leaves it. A dynamic `import()` of a hidden package fails the same
 * way, through the resolve hook of hide-module-hooks.ts.
 */
import Module, { register } from 'node:module';
import { pathToFileURL } from 'node:url';

const hidden = new Set((process.env.WAYPOINT_TEST_HIDE ?? '').split(',').filter(Boolean));
if (hidden.size > 0) register('./hide-module-hooks.js', pathToFileURL(__filename));
const loader = Module as unknown as { _load(request: string, parent: unknown, isMain: boolean): unknown };
const original = loader._load.bind(loader);

loader._load = (request: string, parent: unknown, isMain: boolean): unknown => {
  if (hidden.has(request)) {
    const error = new Error(`Cannot find module '${request}'\nRequire stack:\n- (hidden by the test)`) as NodeJS.ErrnoException;
    error.code = 'MODULE_NOT_FOUND';
    throw error;
  }
  if (request === 'bindings' && hidden.has('better-sqlite3-native')) {
    return () => {
      throw new Error('Could not locate the bindings file. Tried:\n → /nowhere/build/Release/better_sqlite3.node');
    };
  }
  return original(request, parent, isMain);
};
