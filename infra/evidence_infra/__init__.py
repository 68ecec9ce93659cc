"""The evidence CDK app: one construct per capability, wired together in `stack.EvidenceStack`."""
