package provisioning

import "time"

// CredentialSyncTimeout is the bound SyncCredentials puts on one sync
// back (S12): Options.CredentialSyncTimeout, or 30 s when that was zero.
func (p *Preparer) CredentialSyncTimeout() time.Duration { return p.syncTimeout }
