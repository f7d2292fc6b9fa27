import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.time.Duration;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.HashMap;
import java.util.Map;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * Reads one SSM SecureString (GetParameter, WithDecryption) and writes its value to standard output, nothing else.
 *
 * <p>The Nessie image's entry point (entrypoint.sh) captures the output into the Nessie process's environment.
 * Plain JDK only (the image has a JRE and no AWS CLI): the request is signed with AWS Signature Version 4 here.
 *
 * <p>Environment: WAP_DB_PASSWORD_PARAMETER (the parameter's name), AWS_REGION, WAP_SECRETS_ACCESS_KEY_ID,
 * WAP_SECRETS_SECRET_ACCESS_KEY, optionally WAP_SECRETS_SESSION_TOKEN, and WAP_SSM_ENDPOINT (default
 * https://ssm.REGION.amazonaws.com; tests point it at a local moto server). Errors go to standard error and name
 * the parameter, never its value. Exit codes: 0 done, 1 the request failed, 2 a setting is missing.
 */
public final class FetchParameter {
  private static final String SERVICE = "ssm";
  private static final String TARGET = "AmazonSSM.GetParameter";
  private static final String CONTENT_TYPE = "application/x-amz-json-1.1";
  private static final int ATTEMPTS = 3;

  private FetchParameter() {}

  public static void main(String[] args) throws InterruptedException {
    String name = setting("WAP_DB_PASSWORD_PARAMETER");
    String region = setting("AWS_REGION");
    String keyId = setting("WAP_SECRETS_ACCESS_KEY_ID");
    String secret = setting("WAP_SECRETS_SECRET_ACCESS_KEY");
    String token = System.getenv().getOrDefault("WAP_SECRETS_SESSION_TOKEN", "");
    String endpoint = System.getenv().getOrDefault("WAP_SSM_ENDPOINT", "");
    if (endpoint.isEmpty()) {
      endpoint = "https://ssm." + region + ".amazonaws.com";
    }
    if (!name.matches("[A-Za-z0-9_.\\-/]{1,2048}")) {
      fail(2, "the parameter name in WAP_DB_PASSWORD_PARAMETER is not a valid SSM parameter name");
    }
    String body = "{\"Name\":\"" + name + "\",\"WithDecryption\":true}";
    HttpClient client =
        HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(Duration.ofSeconds(10))
            .build();
    String problem = "";
    for (int attempt = 1; attempt <= ATTEMPTS; attempt++) {
      try {
        HttpResponse<String> response =
            client.send(
                signed(URI.create(endpoint + "/"), body, region, keyId, secret, token),
                HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
        Object parsed = new Json(response.body()).value();
        if (response.statusCode() == 200) {
          Object parameter = field(parsed, "Parameter");
          Object value = field(parameter, "Value");
          if (!(value instanceof String)) {
            fail(1, "SSM answered without a value for parameter " + name);
          }
          System.out.print((String) value);
          System.out.flush();
          return;
        }
        problem = "HTTP " + response.statusCode() + " " + field(parsed, "__type") + ": " + field(parsed, "message");
        if (response.statusCode() < 500 && response.statusCode() != 429) {
          break;
        }
      } catch (IOException | IllegalArgumentException e) {
        problem = e.getClass().getSimpleName() + ": " + e.getMessage();
      } catch (GeneralSecurityException e) {
        fail(1, "cannot sign the request: " + e);
      }
      if (attempt < ATTEMPTS) {
        Thread.sleep(1000L * attempt);
      }
    }
    fail(1, "cannot read SSM parameter " + name + " from " + endpoint + " (" + problem + ")");
  }

  static HttpRequest signed(URI uri, String body, String region, String keyId, String secret, String token)
      throws GeneralSecurityException {
    String amzDate =
        ZonedDateTime.now(ZoneOffset.UTC).format(DateTimeFormatter.ofPattern("yyyyMMdd'T'HHmmss'Z'"));
    String date = amzDate.substring(0, 8);
    String host = uri.getPort() == -1 ? uri.getHost() : uri.getHost() + ":" + uri.getPort();
    StringBuilder headers = new StringBuilder();
    headers.append("content-type:").append(CONTENT_TYPE).append('\n');
    headers.append("host:").append(host).append('\n');
    headers.append("x-amz-date:").append(amzDate).append('\n');
    String signedHeaders = "content-type;host;x-amz-date";
    if (!token.isEmpty()) {
      headers.append("x-amz-security-token:").append(token).append('\n');
      signedHeaders += ";x-amz-security-token";
    }
    headers.append("x-amz-target:").append(TARGET).append('\n');
    signedHeaders += ";x-amz-target";
    String path = uri.getRawPath() == null || uri.getRawPath().isEmpty() ? "/" : uri.getRawPath();
    String canonical = "POST\n" + path + "\n\n" + headers + "\n" + signedHeaders + "\n" + hex(sha256(body));
    String scope = date + "/" + region + "/" + SERVICE + "/aws4_request";
    String toSign = "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + hex(sha256(canonical));
    byte[] key = hmac(("AWS4" + secret).getBytes(StandardCharsets.UTF_8), date);
    key = hmac(key, region);
    key = hmac(key, SERVICE);
    key = hmac(key, "aws4_request");
    String signature = hex(hmac(key, toSign));
    HttpRequest.Builder request =
        HttpRequest.newBuilder(uri)
            .timeout(Duration.ofSeconds(20))
            .header("Content-Type", CONTENT_TYPE)
            .header("X-Amz-Date", amzDate)
            .header("X-Amz-Target", TARGET)
            .header(
                "Authorization",
                "AWS4-HMAC-SHA256 Credential=" + keyId + "/" + scope + ", SignedHeaders=" + signedHeaders
                    + ", Signature=" + signature)
            .POST(HttpRequest.BodyPublishers.ofString(body, StandardCharsets.UTF_8));
    if (!token.isEmpty()) {
      request.header("X-Amz-Security-Token", token);
    }
    return request.build();
  }

  private static String setting(String variable) {
    String value = System.getenv(variable);
    if (value == null || value.isBlank()) {
      fail(2, variable + " is not set");
    }
    return value.trim();
  }

  private static void fail(int code, String message) {
    System.err.println("FetchParameter: " + message);
    System.exit(code);
  }

  private static Object field(Object object, String name) {
    return object instanceof Map<?, ?> map ? map.get(name) : null;
  }

  private static byte[] sha256(String text) throws GeneralSecurityException {
    return MessageDigest.getInstance("SHA-256").digest(text.getBytes(StandardCharsets.UTF_8));
  }

  private static byte[] hmac(byte[] key, String data) throws GeneralSecurityException {
    Mac mac = Mac.getInstance("HmacSHA256");
    mac.init(new SecretKeySpec(key, "HmacSHA256"));
    return mac.doFinal(data.getBytes(StandardCharsets.UTF_8));
  }

  private static String hex(byte[] bytes) {
    StringBuilder out = new StringBuilder(bytes.length * 2);
    for (byte b : bytes) {
      out.append(Character.forDigit((b >> 4) & 0xf, 16)).append(Character.forDigit(b & 0xf, 16));
    }
    return out.toString();
  }

  /** Just enough JSON for SSM's answers: objects, arrays, strings (every escape), numbers, literals. */
  static final class Json {
    private final String text;
    private int at;

    Json(String text) {
      this.text = text == null ? "" : text;
    }

    Object value() {
      skipSpace();
      if (at >= text.length()) {
        return null;
      }
      char c = text.charAt(at);
      if (c == '{') {
        Map<String, Object> object = new HashMap<>();
        at++;
        skipSpace();
        if (peek() == '}') {
          at++;
          return object;
        }
        while (true) {
          skipSpace();
          String key = string();
          skipSpace();
          expect(':');
          object.put(key, value());
          skipSpace();
          if (peek() == ',') {
            at++;
          } else {
            expect('}');
            return object;
          }
        }
      }
      if (c == '[') {
        at++;
        skipSpace();
        if (peek() == ']') {
          at++;
          return null;
        }
        while (true) {
          value();
          skipSpace();
          if (peek() == ',') {
            at++;
          } else {
            expect(']');
            return null; // arrays are not needed, only skipped
          }
        }
      }
      if (c == '"') {
        return string();
      }
      int start = at;
      while (at < text.length() && "{}[],: \t\r\n\"".indexOf(text.charAt(at)) < 0) {
        at++;
      }
      return text.substring(start, at);
    }

    private String string() {
      expect('"');
      StringBuilder out = new StringBuilder();
      while (true) {
        if (at >= text.length()) {
          throw new IllegalArgumentException("unterminated JSON string");
        }
        char c = text.charAt(at++);
        if (c == '"') {
          return out.toString();
        }
        if (c != '\\') {
          out.append(c);
          continue;
        }
        char e = text.charAt(at++);
        switch (e) {
          case 'b' -> out.append('\b');
          case 'f' -> out.append('\f');
          case 'n' -> out.append('\n');
          case 'r' -> out.append('\r');
          case 't' -> out.append('\t');
          case 'u' -> {
            out.append((char) Integer.parseInt(text.substring(at, at + 4), 16));
            at += 4;
          }
          default -> out.append(e); // \" \\ \/
        }
      }
    }

    private char peek() {
      return at < text.length() ? text.charAt(at) : '\0';
    }

    private void expect(char c) {
      if (peek() != c) {
        throw new IllegalArgumentException("malformed JSON answer at offset " + at);
      }
      at++;
    }

    private void skipSpace() {
      while (at < text.length() && Character.isWhitespace(text.charAt(at))) {
        at++;
      }
    }
  }
}
