/**
 * better-sqlite3 ships no types, and @types/better-sqlite3 is not a dependency. Tests and benches that open a
 * SQLite file with it import the constructor as `unknown` and cast it to the slice of the API they use.
 */
declare module 'better-sqlite3' {
  const Database: unknown;
  export default Database;
}
