package dev.kura.harness;

import java.nio.file.Files;
import java.nio.file.Path;

/**
 * A single KRaft Kafka node (broker and controller in one JVM) for kura's tests.
 *
 * <p>Usage: {@code Broker <server.properties> <log.dir> <cluster-id>}. Formats the log
 * directory when it holds no meta.properties yet (what kafka-storage.sh format does, without a
 * second JVM start), then runs {@code kafka.Kafka} on the same properties.
 */
public final class Broker {
    private Broker() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: Broker <server.properties> <log.dir> <cluster-id>");
            System.exit(2);
        }
        String props = args[0];
        Path logDir = Path.of(args[1]);
        String clusterId = args[2];
        if (!Files.exists(logDir.resolve("meta.properties"))) {
            int rc = kafka.tools.StorageTool.execute(
                    new String[] {"format", "-t", clusterId, "-c", props, "--ignore-formatted"},
                    System.err);
            if (rc != 0) {
                System.err.println("kura-harness: formatting " + logDir + " failed: " + rc);
                System.exit(1);
            }
        }
        System.err.println("kura-harness: broker starting");
        kafka.Kafka.main(new String[] {props});
    }
}
