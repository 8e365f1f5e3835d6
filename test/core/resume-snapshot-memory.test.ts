import { memoryStorage } from '../../src/index';
import { resumeSnapshotSuite } from './resume-snapshot-suite';

resumeSnapshotSuite('the memory store', () => memoryStorage());
