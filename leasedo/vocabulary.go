package leasedo

import "github.com/mergegate/mergegate/lifecycle"

// The words of a pull request's life in the queue (its statuses, its
// entry, a train's groups) live in lifecycle, which rules decides with
// and which imports nothing of ours; these aliases keep leasedo's callers
// as they were.
type (
	Entry   = lifecycle.Entry
	Item    = lifecycle.Item
	Group   = lifecycle.Group
	GroupPR = lifecycle.GroupPR
	Landed  = lifecycle.Landed
)

// Queue entry statuses (lifecycle.StatusQueued, ...).
const (
	StatusQueued     = lifecycle.StatusQueued
	StatusEvaluating = lifecycle.StatusEvaluating
	StatusGatePassed = lifecycle.StatusGatePassed
	StatusBlocked    = lifecycle.StatusBlocked
	StatusBounced    = lifecycle.StatusBounced
)

// NoConsent is the ConsentSha of an entry no writer consented to yet.
const NoConsent = lifecycle.NoConsent

// The states of a train group (docs/trains.md).
const (
	GroupPlanned  = lifecycle.GroupPlanned
	GroupBuilding = lifecycle.GroupBuilding
	GroupTesting  = lifecycle.GroupTesting
	GroupPassed   = lifecycle.GroupPassed
	GroupLanding  = lifecycle.GroupLanding
)

// Branches mergegate makes (lifecycle.BranchPrefix).
const (
	BranchPrefix      = lifecycle.BranchPrefix
	BuildBranchPrefix = lifecycle.BuildBranchPrefix
)
