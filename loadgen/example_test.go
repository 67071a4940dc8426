package loadgen_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/kuracache/kura/internal/harness/servers"
	"github.com/kuracache/kura/loadgen"
)

// Run 2,000 pipelined SETs against a private redis-server and compare the
// count with what the server itself counted.
func ExampleRun() {
	ctx := context.Background()
	srv, err := servers.StartRedis(ctx, servers.RedisConfig{})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Stop()

	res, err := loadgen.Run(ctx, loadgen.Config{
		Target:      srv.URL(),
		Command:     loadgen.CmdSet,
		Connections: 4,
		Pipeline:    16,
		Requests:    2000,
		DataSize:    "100-1000",
		TTL:         time.Minute,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ops:", res.Ops, "errors:", res.Errors)
	fmt.Println("server counted SET:", res.Server.Commands["set"])
	fmt.Println("corrected for coordinated omission:", res.CoordinatedOmissionCorrected)
	// Output:
	// ops: 2000 errors: 0
	// server counted SET: 2000
	// corrected for coordinated omission: false
}
