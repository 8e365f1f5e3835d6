export * from '../contract/errors';
