// Runs a TLC main class (TLCServer, TLCWorker) with every RMI server socket bound to one
// address: Java RMI listens on all interfaces by default, and it has no authentication, so a
// distributed TLC run must not be reachable from other machines unless the user asks for it.
// Started in the JDK's source-file mode: java -cp tla2tools.jar LoopbackRmi.java ADDRESS CLASS ARGS...
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.rmi.server.RMISocketFactory;
import java.util.Arrays;

public class LoopbackRmi {
    public static void main(String[] args) throws Exception {
        final InetAddress address = InetAddress.getByName(args[0]);
        RMISocketFactory.setSocketFactory(new RMISocketFactory() {
            @Override
            public ServerSocket createServerSocket(int port) throws IOException {
                return new ServerSocket(port, 50, address);
            }

            @Override
            public Socket createSocket(String host, int port) throws IOException {
                return new Socket(host, port);
            }
        });
        Class<?> main = Class.forName(args[1]);
        main.getMethod("main", String[].class)
            .invoke(null, (Object) Arrays.copyOfRange(args, 2, args.length));
    }
}
