import { memoryStorage } from '../../src/index';
import { controlFlowSuite } from './control-flow-suite';

controlFlowSuite('the memory store', () => memoryStorage());
