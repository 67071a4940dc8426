package redial

import (
	"errors"
	"net"
	"os"
)

// Cause is err without net.OpError's "dial tcp ...:" prefix (and an
// os.SyscallError's "connect:"), which repeats the address a message
// about the connection already names: "connection refused" rather than
// "dial tcp 127.0.0.1:6379: connect: connection refused". Other errors
// are returned as they are.
func Cause(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		var sys *os.SyscallError
		if errors.As(op.Err, &sys) {
			return sys.Err
		}
		return op.Err
	}
	return err
}
