import { PipelineDefinitionError } from '../contract/errors';
import { recordSecret } from './metadata';
import type { AnyClass } from './class-type';

/**
 * Marks a state property as secret: it is never stored in clear text. With `encryption` configured it
 * is stored encrypted like every payload; without it, any input or step output carrying the property is
 * refused with `SECRET_NOT_PROTECTED` before anything is written.
 *
 * @example
 * class State { @IsString() ticker!: string; @Secret() @IsString() apiToken!: string; }
 */
export function Secret(): PropertyDecorator {
  return (target, key) => {
    if (typeof key !== 'string') throw new PipelineDefinitionError(`@Secret on ${(target as { constructor: AnyClass }).constructor.name}: secret properties need a string name.`);
    recordSecret((target as { constructor: AnyClass }).constructor, key);
  };
}
