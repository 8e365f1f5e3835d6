import { memoryStorage } from '../../src/index';
import { durabilityAsyncSuite } from './durability-async-suite';

durabilityAsyncSuite('the memory store', () => memoryStorage());
