// WaypointError.code is the union of the codes in WAYPOINT_ERROR_CODES, so a misspelt code in a check does
// not compile: each `@ts-expect-error` below fails the build (`npm run build`) if the line ever compiles.
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { CliError, EXIT } from '../../src/cli/exit-codes';
import { HttpError } from '../../src/ui/errors';
import { WAYPOINT_ERROR_CODES, WaypointError, isWaypointErrorCode, type WaypointErrorCode } from '../../src';

function isLocked(err: WaypointError): boolean {
  // @ts-expect-error 'RUN_LOKED' is not a Waypoint error code.
  if (err.code === 'RUN_LOKED') return true;
  return err.code === 'RUN_LOCKED';
}

describe('WaypointErrorCode', () => {
  it('types code comparisons, the base constructor and the subclasses that take a code', () => {
    assert.equal(isLocked(new WaypointError('RUN_LOCKED', 'Run r1 is locked.')), true);
    assert.equal(isLocked(new WaypointError('LEASE_LOST', 'Lease lost.')), false);
    // @ts-expect-error a misspelt code cannot construct an error.
    assert.equal(new WaypointError('LEASE_LOTS', 'x.').code, 'LEASE_LOTS');
    // @ts-expect-error nor an HTTP error.
    assert.equal(new HttpError(400, 'BAD_QUERRY', 'x.').code, 'BAD_QUERRY');
    // @ts-expect-error nor a CLI error.
    assert.equal(new CliError('CLI_USGE', 'x.', EXIT.USAGE).code, 'CLI_USGE');
    const code: WaypointErrorCode = new HttpError(400, 'BAD_QUERY', 'x.').code;
    assert.ok(code in WAYPOINT_ERROR_CODES);
  });

  it('isWaypointErrorCode accepts exactly the keys of the table', () => {
    for (const code of Object.keys(WAYPOINT_ERROR_CODES)) assert.equal(isWaypointErrorCode(code), true, code);
    for (const other of ['RUN_LOKED', 'ECONNRESET', 'toString', '__proto__', '', 42, null, undefined]) assert.equal(isWaypointErrorCode(other), false, String(other));
  });
});
