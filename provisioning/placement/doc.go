// Package placement owns where a project's container lives and what it
// may use on the LXD side: cluster targets (TargetError, ErrBadTarget),
// moves between members (MovingCopy, AwaitMove, Evacuated, MemberName),
// storage pools (CheckPool, RootOnPool) and resource limits (LimitsPatch, and
// Excesses and Clamp against the operator's caps).
// provisioning calls it while it prepares and reconciles containers.
//
// It imports lxdexec, api, errdefs and lazyre only, and must never import
// provisioning (which imports it), providers, the daemon or config.
package placement
