// Package pglock names the PostgreSQL advisory locks that more than one
// package takes, so that the store (package storage) and the certificate
// storage (modules/pgstorage) agree on them without one importing the other.
package pglock

// Schema is the statement that takes, until its transaction ends, the
// advisory lock under which every node of a cluster changes the shared
// database's schema: the store's migration and the certificate storage's
// tables.
const Schema = "SELECT pg_advisory_xact_lock(8020171201)"
