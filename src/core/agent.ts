export * from '../contract/agent';
