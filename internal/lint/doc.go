// Package lint holds tests that keep the code's shape: the store is the
// only code that talks to Redis, and comments cite the project's own
// documents. It has no code of its own.
package lint
