// A real OpenID Connect provider for the login test: node-oidc-provider (an OpenID Certified
// implementation), on 127.0.0.1, with its development login and consent pages (any password
// is taken; the login names the account). Started by
// crates/cli/tests/cli/dashboard_logins_in_a_browser.rs with
//   PORT           where to listen          REDIRECT_URI   the dashboard's /login/callback
//   CLIENT_SECRET  the dashboard's secret   ACCOUNT_GROUPS JSON: account -> its groups
// Prints `ready ISSUER` once listening. The ID token carries email and groups, as Dex's does.
import { generateKeyPairSync } from 'node:crypto';
import Provider from 'oidc-provider';

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};
const port = Number(env('PORT'));
const issuer = `http://127.0.0.1:${port}`;
const groups = JSON.parse(env('ACCOUNT_GROUPS'));
const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const signing = { ...privateKey.export({ format: 'jwk' }), kid: 'test-rs256', use: 'sig', alg: 'RS256' };

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: 'sluice-dashboard',
      client_secret: env('CLIENT_SECRET'),
      redirect_uris: [env('REDIRECT_URI')],
      grant_types: ['authorization_code'],
      response_types: ['code'],
    },
  ],
  jwks: { keys: [signing] },
  scopes: ['openid', 'email', 'profile', 'groups'],
  claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'], groups: ['groups'] },
  // Claims in the ID token itself, where kube-apiserver and the dashboard read them.
  conformIdTokenClaims: false,
  pkce: { required: () => true },
  cookies: { keys: ['sluice-login-test'] },
  findAccount: async (_ctx, id) => ({
    accountId: id,
    claims: async () => ({ sub: id, email: id, email_verified: true, name: id, groups: groups[id] ?? [] }),
  }),
});
provider.on('server_error', (_ctx, error) => console.error('provider error:', error));
provider.listen(port, '127.0.0.1', () => console.log(`ready ${issuer}`));
