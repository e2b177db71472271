/**
 * The contract spec's schema and checks: part of the pipeline spec itself, so they live in src/model/contract.ts
 * (src/model imports nothing above it); re-exported here beside the shapes the contract activities share.
 */
export {
  canonicalContract,
  CONTRACT_FIELD_HINTS,
  ContractInput,
  contractProblems,
  DEFAULT_CONTRACT_RETRIES,
  MAX_CONTRACT_RETRIES,
} from '../../model/contract';
export * from './shapes';
