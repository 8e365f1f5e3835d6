import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { IsInt, IsString, ValidateNested } from 'class-validator';
import { readDeclaredType } from '../../src/decorators/metadata';

class Address {
  @IsString() city!: string;
}

class State {
  @ValidateNested() address!: Address;
  @IsInt() count: number = 0;
  plain: string[] = [];
}

describe('readDeclaredType (the one design:type read, for the state schema)', () => {
  it("returns TypeScript's recorded type of a decorated property and undefined for an undecorated one", () => {
    assert.equal(readDeclaredType(State.prototype, 'address'), Address);
    assert.equal(readDeclaredType(State.prototype, 'count'), Number);
    assert.equal(readDeclaredType(State.prototype, 'plain'), undefined, 'no decorator, no design:type');
    assert.equal(readDeclaredType(State.prototype, 'missing'), undefined);
  });
});
