export * from '../contract/checkpoint-store';
