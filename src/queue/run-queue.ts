export * from '../contract/run-queue';
