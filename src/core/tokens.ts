export * from '../contract/tokens';
