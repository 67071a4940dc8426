package dev.kura.harness;

import io.debezium.engine.ChangeEvent;
import io.debezium.engine.DebeziumEngine;
import io.debezium.engine.format.Json;
import java.io.FileInputStream;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Future;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Debezium's embedded engine writing its change events to Kafka: one JVM instead of a Kafka
 * Connect worker, for kura's tests and soak runs.
 *
 * <p>Usage: {@code DebeziumToKafka <engine.properties>}. Every property is handed to the
 * engine (connector.class, offset storage, converter.schemas.enable, ...) except those that
 * start with {@code producer.}, which configure the Kafka producer with that prefix removed
 * ({@code producer.bootstrap.servers=127.0.0.1:PORT}). Each event goes to the topic Debezium
 * names ({@code topic.prefix.schema.table}, or the transaction topic), keyed by Debezium's key
 * (the row's primary key), a delete's tombstone as a null value. The engine's offsets are
 * committed only after the producer acknowledged the batch (acks=all), so a crash replays
 * rather than loses.
 *
 * <p>Lines starting with {@code kura-harness:} on stdout tell the Go harness what happened
 * ({@code polling} when the engine starts polling the connector, {@code streaming} once the
 * connector streams, {@code stopped ...} when the engine ends).
 */
public final class DebeziumToKafka {
    private DebeziumToKafka() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: DebeziumToKafka <engine.properties>");
            System.exit(2);
        }
        Properties all = new Properties();
        try (InputStream in = new FileInputStream(args[0])) {
            all.load(in);
        }
        Properties engineProps = new Properties();
        Properties producerProps = new Properties();
        for (String name : all.stringPropertyNames()) {
            if (name.startsWith("producer.")) {
                producerProps.setProperty(name.substring("producer.".length()), all.getProperty(name));
            } else {
                engineProps.setProperty(name, all.getProperty(name));
            }
        }
        producerProps.putIfAbsent(ProducerConfig.ACKS_CONFIG, "all");
        producerProps.putIfAbsent(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        producerProps.putIfAbsent(ProducerConfig.LINGER_MS_CONFIG, "0");
        producerProps.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        producerProps.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());

        KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps);
        CountDownLatch done = new CountDownLatch(1);
        int[] exit = {0};

        DebeziumEngine<ChangeEvent<String, String>> engine = DebeziumEngine.create(Json.class)
                .using(engineProps)
                .using(new DebeziumEngine.ConnectorCallback() {
                    @Override
                    public void pollingStarted() {
                        say("polling");
                        Thread w = new Thread(DebeziumToKafka::awaitStreaming, "kura-await-streaming");
                        w.setDaemon(true);
                        w.start();
                    }
                })
                .using((success, message, error) -> {
                    if (!success) {
                        exit[0] = 1;
                    }
                    say("stopped success=" + success + " message=" + oneLine(message)
                            + (error == null ? "" : " error=" + oneLine(rootCause(error))));
                    done.countDown();
                })
                .notifying((records, committer) -> {
                    List<Future<?>> sent = new ArrayList<>(records.size());
                    for (ChangeEvent<String, String> r : records) {
                        sent.add(producer.send(new ProducerRecord<>(r.destination(), r.key(), r.value())));
                    }
                    for (Future<?> f : sent) {
                        try {
                            f.get();
                        } catch (java.util.concurrent.ExecutionException e) {
                            throw new RuntimeException("kafka send failed", e.getCause());
                        }
                    }
                    for (ChangeEvent<String, String> r : records) {
                        committer.markProcessed(r);
                    }
                    committer.markBatchFinished();
                })
                .build();

        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                engine.close();
                done.await();
            } catch (Exception e) {
                // shutting down anyway
            }
            producer.close();
        }));
        Thread t = new Thread(engine, "debezium-engine");
        t.start();
        done.await();
        producer.close();
        System.exit(exit[0]);
    }

    /**
     * Says "streaming" once the connector's streaming metrics report it connected (its slot or
     * binlog reader is live, the snapshot done): the engine's pollingStarted comes earlier, before
     * a PostgreSQL connector has even created its slot, so a write made then may be missed.
     */
    private static void awaitStreaming() {
        javax.management.MBeanServer mbs = java.lang.management.ManagementFactory.getPlatformMBeanServer();
        try {
            javax.management.ObjectName pattern =
                    new javax.management.ObjectName("debezium.*:type=connector-metrics,context=streaming,*");
            while (true) {
                for (javax.management.ObjectName n : mbs.queryNames(pattern, null)) {
                    Object connected = mbs.getAttribute(n, "Connected");
                    if (Boolean.TRUE.equals(connected)) {
                        say("streaming");
                        return;
                    }
                }
                Thread.sleep(50);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (Exception e) {
            say("streaming-unknown " + oneLine(e));
        }
    }

    private static void say(String line) {
        System.out.println("kura-harness: " + line);
        System.out.flush();
    }

    private static Throwable rootCause(Throwable t) {
        while (t.getCause() != null && t.getCause() != t) {
            t = t.getCause();
        }
        return t;
    }

    private static String oneLine(Object o) {
        return String.valueOf(o).replace('\n', ' ').replace('\r', ' ');
    }
}
