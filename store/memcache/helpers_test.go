package memcache_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kuracache/kura/internal/servers"
)

// pause SIGSTOPs srv and waits until the kernel reports every thread
// stopped: the signal is asynchronous, and a worker thread may otherwise
// answer one more request.
func pause(t *testing.T, srv *servers.Memcached) {
	t.Helper()
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", srv.Pid()))
		stopped := len(tasks) > 0
		for _, task := range tasks {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", srv.Pid(), task.Name()))
			// The state follows the parenthesised command name.
			if i := strings.LastIndexByte(string(b), ')'); i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
				stopped = false
			}
		}
		if stopped {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("server did not stop")
}
