// ESLint for Waypoint (issue 18): typescript-eslint, type-aware. Run with `npm run lint`.
// The lint toolchain is its own package in tools/lint (installed by `npm run lint:install`): our compiler is
// TypeScript 7, whose `typescript` package has no compiler API, and typescript-eslint needs typescript < 6.1.
// So typescript-eslint (and, through it, the parser's `typescript`) is resolved from tools/lint/node_modules.
import { createRequire } from 'node:module';

const require = createRequire(new URL('./tools/lint/package.json', import.meta.url));
const tseslint = require('typescript-eslint');
const tsconfigRootDir = import.meta.dirname;

export default tseslint.config(
  {
    // Only the TypeScript sources are linted (type-aware); the few JS config files and scripts are left to Prettier.
    ignores: ['dist/**', 'dist-*/**', '**/node_modules/**', 'etc/**', 'test-artifacts/**', '**/*.js', '**/*.cjs', '**/*.mjs'],
  },
  {
    linterOptions: { reportUnusedDisableDirectives: 'error' },
  },
  {
    files: ['**/*.ts'],
    extends: [tseslint.configs.recommendedTypeChecked],
    languageOptions: { parserOptions: { project: ['./tsconfig.json'], tsconfigRootDir } },
    rules: {
      // The point of this lint (conventions: "every promise awaited or deliberately handled"; a lost promise
      // in the checkpoint path is lost data). node:test's describe/it return promises the runner tracks itself.
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          allowForKnownSafeCalls: [{ from: 'package', package: 'node:test', name: ['describe', 'it', 'test', 'suite', 'before', 'after', 'beforeEach', 'afterEach'] }],
        },
      ],
      '@typescript-eslint/no-misused-promises': 'error',
      // A `default:` clause is an explicit decision about the other cases, so it counts as exhaustive.
      '@typescript-eslint/switch-exhaustiveness-check': ['error', { considerDefaultExhaustiveForUnions: true }],
      // `let x; x = await make(() => x...)` (a closure that reads the variable later) is not a const candidate.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],

      // The whole recommended set is on. `_`-prefixed names are deliberately unused (a parameter a signature needs).
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      // A rejection that passes on a value it did not make (a caught error, an abort signal's reason) is a
      // rethrow: allowed for unknown/any, as only-throw-error allows it for `throw`. Literals are still refused.
      '@typescript-eslint/prefer-promise-reject-errors': ['error', { allowThrowingAny: true, allowThrowingUnknown: true }],
    },
  },
  {
    // Functions short enough to read at once (issue 18; 60 since issue 36). Blank lines and comments do not
    // count. The store conformance suites are lists of test cases, one `it` each, so their case-list
    // functions are exempt.
    files: ['src/**/*.ts'],
    ignores: ['src/testing/**'],
    // And files short enough to hold one thing (issue 36): 400 lines, every line counted.
    rules: {
      'max-lines-per-function': ['error', { max: 60, skipBlankLines: true, skipComments: true }],
      'max-lines': ['error', { max: 400, skipBlankLines: false, skipComments: false }],
    },
  },
  {
    // The SQL builders' statement tables (one object of SQL texts per store, one entry per statement) are
    // lists, not logic: nothing in them runs, and splitting one would scatter a store's statements over files.
    files: ['src/storage/sql/sql-*.ts'],
    rules: { 'max-lines-per-function': 'off' },
  },
  {
    // The timeline page's classic scripts: browser libs, their own tsconfig. They share one scope, so a `let`
    // assigned in another file looks never-reassigned to a per-file rule.
    files: ['src/ui/browser/**/*.ts'],
    // They are classic scripts (sourceType 'script'): a top-level name another file uses is listed in the
    // file's `/* exported ... */` comment, which is how no-unused-vars learns that it is used.
    languageOptions: { sourceType: 'script', parserOptions: { project: ['./tsconfig.browser.json'], tsconfigRootDir } },
    rules: { 'prefer-const': 'off' },
  },
);
