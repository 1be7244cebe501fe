export const POOL_SIZE = 20;
